#include "common/stats.h"

#include <algorithm>
#include <cmath>

namespace falcon::common {
namespace {

// Midpoint of two doubles that does not overflow when both are near the largest finite double.
double Midpoint(double lower, double upper) {
  const double sum = lower + upper;
  return std::isfinite(sum) ? 0.5 * sum : 0.5 * lower + 0.5 * upper;
}

}  // namespace

double Median(absl::Span<const double> values) {
  if (values.empty()) return 0;
  std::vector<double> v(values.begin(), values.end());
  const size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + mid, v.end());
  if (v.size() % 2 == 1) return v[mid];
  const double upper = v[mid];
  const double lower = *std::max_element(v.begin(), v.begin() + mid);
  return Midpoint(lower, upper);
}

int64_t Median(absl::Span<const int64_t> values) {
  if (values.empty()) return 0;
  std::vector<int64_t> v(values.begin(), values.end());
  const size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + mid, v.end());
  if (v.size() % 2 == 1) return v[mid];
  const int64_t upper = v[mid];
  const int64_t lower = *std::max_element(v.begin(), v.begin() + mid);
  // lower <= upper, so their difference is exact in uint64 and lower + diff / 2 lies in
  // [lower, upper]: no overflow, rounded toward negative infinity.
  const uint64_t diff = static_cast<uint64_t>(upper) - static_cast<uint64_t>(lower);
  return static_cast<int64_t>(static_cast<uint64_t>(lower) + diff / 2);
}

absl::Duration Median(absl::Span<const absl::Duration> values) {
  if (values.empty()) return absl::ZeroDuration();
  std::vector<absl::Duration> v(values.begin(), values.end());
  const size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + mid, v.end());
  if (v.size() % 2 == 1) return v[mid];
  const absl::Duration upper = v[mid];
  const absl::Duration lower = *std::max_element(v.begin(), v.begin() + mid);
  return lower + (upper - lower) / 2;
}

std::vector<double> MediansExcludingEach(absl::Span<const double> values) {
  const size_t m = values.size();
  std::vector<double> out(m, 0);
  if (m < 2) return out;
  std::vector<size_t> order(m);
  for (size_t i = 0; i < m; ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return values[a] < values[b]; });
  std::vector<double> sorted(m);
  for (size_t k = 0; k < m; ++k) sorted[k] = values[order[k]];
  // Without the value at sorted position p, the k-th smallest of the rest is sorted[k] below p
  // and sorted[k + 1] from p on.
  const size_t n = m - 1;
  for (size_t p = 0; p < m; ++p) {
    auto rest = [&](size_t k) { return k < p ? sorted[k] : sorted[k + 1]; };
    out[order[p]] = n % 2 == 1 ? rest(n / 2) : Midpoint(rest(n / 2 - 1), rest(n / 2));
  }
  return out;
}

double Mad(absl::Span<const double> values) {
  if (values.size() < 2) return 0;
  const double m = Median(values);
  std::vector<double> dev;
  dev.reserve(values.size());
  for (double x : values) dev.push_back(std::fabs(x - m));
  return Median(dev);
}

double Quantile(absl::Span<const double> values, double q) {
  if (values.empty()) return 0;
  if (std::isnan(q)) q = 0.5;
  q = std::clamp(q, 0.0, 1.0);
  std::vector<double> v(values.begin(), values.end());
  std::sort(v.begin(), v.end());
  const double h = q * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(h));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  const double frac = h - static_cast<double>(lo);
  return v[lo] + frac * (v[hi] - v[lo]);
}

double Mean(absl::Span<const double> values) {
  if (values.empty()) return 0;
  double sum = 0;
  for (double v : values) sum += v;
  if (std::isfinite(sum)) return sum / static_cast<double>(values.size());
  // Finite values whose sum overflows: sum them scaled by an exact power of two.
  sum = 0;
  for (double v : values) sum += std::ldexp(v, -64);
  return std::ldexp(sum / static_cast<double>(values.size()), 64);
}

}  // namespace falcon::common
