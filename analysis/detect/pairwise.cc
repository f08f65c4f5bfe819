#include "analysis/detect/pairwise.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "common/stats.h"

namespace falcon::analysis::detect {
namespace {

struct EndpointCounts {
  int slow = 0;
  int fine = 0;
};

std::string LinkName(const EndpointPair& p) { return absl::StrCat(p.a, "-", p.b); }

}  // namespace

absl::Status PairwiseOptions::Validate() const {
  if (!(slow_ratio > 0 && slow_ratio <= 10)) {
    return absl::InvalidArgumentError(
        absl::StrCat("slow_ratio: ", slow_ratio, " is outside (0, 10]"));
  }
  return absl::OkStatus();
}

absl::StatusOr<PairwiseResult> LocalizePairwise(const std::vector<PairMeasurement>& measurements,
                                                const PairwiseOptions& options) {
  if (absl::Status s = options.Validate(); !s.ok()) return s;
  if (measurements.empty()) return absl::InvalidArgumentError("no pair measured");
  // Fastest figure per unordered pair.
  std::map<std::pair<std::string, std::string>, double> best;
  for (const PairMeasurement& m : measurements) {
    const std::string where = m.origin.empty() ? "" : absl::StrCat(m.origin, ": ");
    if (m.a.empty() || m.b.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(where, "empty endpoint name"));
    }
    if (m.a == m.b) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, "pair of '", m.a, "' with itself: a pair needs two endpoints"));
    }
    if (!std::isfinite(m.bandwidth) || m.bandwidth <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(where, "bandwidth of ", m.a, "-", m.b, " is ",
                                                     m.bandwidth, ": must be a finite number > 0"));
    }
    const auto key = m.a < m.b ? std::make_pair(m.a, m.b) : std::make_pair(m.b, m.a);
    auto [it, inserted] = best.emplace(key, m.bandwidth);
    if (!inserted) it->second = std::max(it->second, m.bandwidth);
  }

  PairwiseResult result;
  std::vector<double> values;
  values.reserve(best.size());
  for (const auto& [pair, bw] : best) values.push_back(bw);
  result.reference_bandwidth = common::Quantile(values, 0.75);
  result.pairs = static_cast<int>(best.size());

  auto ratio_of = [&](double bw) { return result.reference_bandwidth / bw; };
  auto is_slow = [&](double bw) { return ratio_of(bw) >= 1 + options.slow_ratio; };
  std::map<std::string, EndpointCounts> counts;
  for (const auto& [pair, bw] : best) {
    const bool slow = is_slow(bw);
    result.slow_pairs += slow ? 1 : 0;
    for (const std::string& e : {pair.first, pair.second}) {
      (slow ? counts[e].slow : counts[e].fine) += 1;
    }
  }
  result.endpoints = static_cast<int>(counts.size());

  // Slow endpoints: at least two pairs, every one of them slow.
  std::set<std::string> slow_endpoints;
  std::vector<PairwiseFinding> endpoint_findings, link_findings;
  for (const auto& [e, c] : counts) {
    if (c.slow < 2 || c.fine > 0) continue;
    slow_endpoints.insert(e);
    PairwiseFinding f;
    f.kind = PairwiseFinding::Kind::kEndpoint;
    f.endpoint = e;
    std::vector<double> ratios;
    for (const auto& [pair, bw] : best) {
      if (pair.first != e && pair.second != e) continue;
      f.slow_pairs.push_back({pair.first, pair.second});
      ratios.push_back(ratio_of(bw));
    }
    f.ratio = common::Median(ratios);
    endpoint_findings.push_back(std::move(f));
  }
  // Endpoints seen fine with someone: the witnesses an undecided end can be measured against,
  // first those whose every slow pair is explained by a slow endpoint.
  auto explained = [&](const std::pair<std::string, std::string>& pair) {
    return slow_endpoints.count(pair.first) > 0 || slow_endpoints.count(pair.second) > 0;
  };
  std::map<std::string, int> unexplained_slow;
  for (const auto& [pair, bw] : best) {
    if (!is_slow(bw) || explained(pair)) continue;
    ++unexplained_slow[pair.first];
    ++unexplained_slow[pair.second];
  }
  std::vector<std::string> witnesses;
  for (int clean = 1; clean >= 0; --clean) {
    for (const auto& [e, c] : counts) {
      if (c.fine > 0 && (unexplained_slow[e] == 0) == (clean == 1)) witnesses.push_back(e);
    }
  }
  for (const auto& [pair, bw] : best) {
    if (!is_slow(bw)) continue;
    if (explained(pair)) continue;  // Part of a slow endpoint.
    PairwiseFinding f;
    f.link = {pair.first, pair.second};
    f.ratio = ratio_of(bw);
    const bool a_fine = counts[pair.first].fine > 0;
    const bool b_fine = counts[pair.second].fine > 0;
    if (a_fine && b_fine) {
      f.kind = PairwiseFinding::Kind::kLink;
    } else {
      f.kind = PairwiseFinding::Kind::kAmbiguous;
      for (const std::string& end : {pair.first, pair.second}) {
        if (counts[end].fine > 0) continue;
        f.candidates.push_back(absl::StrCat("endpoint ", end));
        // One unmeasured pair of this end with a witness decides it: fine -> the link, slow ->
        // the end. The first witness (clean ones first, in name order) keeps the advice
        // deterministic.
        for (const std::string& w : witnesses) {
          if (w == pair.first || w == pair.second) continue;
          const auto key = end < w ? std::make_pair(end, w) : std::make_pair(w, end);
          if (best.count(key) > 0) continue;
          f.deciding_pairs.push_back({key.first, key.second});
          break;
        }
      }
      f.candidates.push_back(absl::StrCat("link ", LinkName(f.link)));
    }
    link_findings.push_back(std::move(f));
  }
  auto slowest_first = [](const PairwiseFinding& x, const PairwiseFinding& y) {
    return x.ratio > y.ratio;
  };
  std::stable_sort(endpoint_findings.begin(), endpoint_findings.end(), slowest_first);
  std::stable_sort(link_findings.begin(), link_findings.end(), slowest_first);
  result.findings = std::move(endpoint_findings);
  for (PairwiseFinding& f : link_findings) result.findings.push_back(std::move(f));
  return result;
}

std::string DescribeFinding(const PairwiseFinding& f, const std::string& endpoint_word) {
  switch (f.kind) {
    case PairwiseFinding::Kind::kEndpoint:
      return absl::StrFormat(
          "%s %s: all %d of its pairs are slow (x%.2f slower than the reference pair): its NIC or "
          "the "
          "%s, not "
          "%d separate links",
          endpoint_word, f.endpoint, f.slow_pairs.size(), f.ratio, endpoint_word,
          f.slow_pairs.size());
    case PairwiseFinding::Kind::kLink:
      return absl::StrFormat(
          "link %s: slow (x%.2f slower than the reference pair) while %s and %s are fine with "
          "others",
          LinkName(f.link), f.ratio, f.link.a, f.link.b);
    case PairwiseFinding::Kind::kAmbiguous: {
      std::vector<std::string> decide;
      for (const EndpointPair& p : f.deciding_pairs) decide.push_back(LinkName(p));
      std::string candidates = absl::StrJoin(f.candidates, " or ");
      return absl::StrFormat(
          "ambiguous: pair %s is slow (x%.2f slower than the reference pair): %s; %s",
          LinkName(f.link), f.ratio,
          absl::StrReplaceAll(candidates, {{"endpoint ", endpoint_word + " "}}),
          decide.empty()
              ? std::string("no other endpoint was measured fine to decide against")
              : absl::StrCat("measure ", absl::StrJoin(decide, " and "),
                             " to decide (fine: the link; slow: the ", endpoint_word, ")"));
    }
  }
  return "";
}

}  // namespace falcon::analysis::detect
