#include "analysis/detect/bandwidth_reference.h"

#include <algorithm>
#include <cmath>

#include "common/stats.h"

namespace falcon::analysis::detect {

bool BandwidthReference::Slow(double bandwidth) const {
  return Ratio(bandwidth) >= 1 + slow_ratio &&
         (!noise_known || noise_sigmas <= 0 ||
          bandwidth <= healthy_median - noise_sigmas * noise_sigma);
}

BandwidthReference JudgeBandwidths(std::vector<double> values, double slow_ratio,
                                   double noise_sigmas) {
  BandwidthReference r;
  r.slow_ratio = slow_ratio;
  r.noise_sigmas = noise_sigmas;
  if (values.empty()) return r;
  std::sort(values.begin(), values.end());
  r.reference = values[(3 * values.size() + 3) / 4 - 1];  // Nearest rank.
  std::vector<double> healthy;
  for (double v : values) {
    if (r.Ratio(v) < 1 + slow_ratio) healthy.push_back(v);
  }
  r.healthy_median = common::Median(healthy);  // The reference is healthy: never empty.
  std::vector<double> deviations;
  for (double v : healthy) deviations.push_back(std::fabs(v - r.healthy_median));
  r.noise_sigma = common::kMadToSigma * common::Median(deviations);
  r.noise_known = healthy.size() >= kMinValuesForNoise && r.noise_sigma > 0;
  return r;
}

}  // namespace falcon::analysis::detect
