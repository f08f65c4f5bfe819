#include "analysis/detect/tcpd_f1.h"

#include <algorithm>
#include <cstdlib>
#include <set>

#include "absl/strings/str_cat.h"

namespace falcon::analysis::detect {
namespace {

// Annotations (ascending) matched one-to-one to their nearest unused prediction within margin.
int64_t TruePositives(const std::set<int64_t>& annotations, const std::set<int64_t>& predictions,
                      int64_t margin) {
  std::set<int64_t> unused = predictions;
  int64_t tp = 0;
  for (int64_t tau : annotations) {
    if (unused.empty()) break;
    // Nearest unused prediction; the smaller one on ties.
    auto hi = unused.lower_bound(tau);
    auto best = unused.end();
    if (hi != unused.end()) best = hi;
    if (hi != unused.begin()) {
      auto lo = std::prev(hi);
      if (best == unused.end() || tau - *lo <= *best - tau) best = lo;
    }
    if (std::llabs(*best - tau) <= margin) {
      ++tp;
      unused.erase(best);
    }
  }
  return tp;
}

}  // namespace

absl::StatusOr<F1Score> TcpdF1(const std::vector<std::vector<int64_t>>& annotations,
                               absl::Span<const int64_t> predictions, int64_t margin) {
  if (annotations.empty()) return absl::InvalidArgumentError("no annotators");
  if (margin < 0)
    return absl::InvalidArgumentError(absl::StrCat("margin must be >= 0, got ", margin));
  std::set<int64_t> x = {0};
  for (int64_t p : predictions) {
    if (p < 0) return absl::InvalidArgumentError(absl::StrCat("prediction ", p, " is negative"));
    x.insert(p);
  }
  std::set<int64_t> all = {0};
  std::vector<std::set<int64_t>> sets;
  for (size_t k = 0; k < annotations.size(); ++k) {
    std::set<int64_t> s = {0};
    for (int64_t a : annotations[k]) {
      if (a < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("annotator ", k, " has a negative index ", a));
      }
      s.insert(a);
      all.insert(a);
    }
    sets.push_back(std::move(s));
  }
  F1Score out;
  out.precision =
      static_cast<double>(TruePositives(all, x, margin)) / static_cast<double>(x.size());
  double recall = 0;
  for (const auto& s : sets) {
    recall += static_cast<double>(TruePositives(s, x, margin)) / static_cast<double>(s.size());
  }
  out.recall = recall / static_cast<double>(sets.size());
  const double sum = out.precision + out.recall;
  out.f1 = sum > 0 ? 2 * out.precision * out.recall / sum : 0.0;
  return out;
}

}  // namespace falcon::analysis::detect
