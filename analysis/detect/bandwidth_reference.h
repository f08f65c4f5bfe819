// What a bandwidth is judged against when the healthy value is unknown and some of the measured
// parts may be slow (docs/algorithms.md#pairwise-localization): the upper quartile of the
// measured values, taken as a measured value (nearest rank), not their median (a slow NIC or
// node drags many of the values, up to half of a small set, while the upper quartile stays a
// healthy one as long as fewer than 3/4 are slow); and the noise of the values the ratio alone
// calls healthy (1.4826 x their median absolute deviation), so that the tail of ordinary
// measurement noise in a large set is not called slow. Shared by pairwise localization
// (pairwise.h) and peer timing (peer_links.h). Falcon's own method. Pure.
#ifndef FALCON_ANALYSIS_DETECT_BANDWIDTH_REFERENCE_H_
#define FALCON_ANALYSIS_DETECT_BANDWIDTH_REFERENCE_H_

#include <cstddef>
#include <vector>

namespace falcon::analysis::detect {

// Fewer healthy values than this say nothing about the noise.
inline constexpr size_t kMinValuesForNoise = 8;

struct BandwidthReference {
  double reference = 0;       // Upper quartile, a measured value; > 0.
  double healthy_median = 0;  // Median of the values with Ratio < 1 + slow_ratio.
  double noise_sigma = 0;     // 1.4826 x their median absolute deviation.
  bool noise_known = false;   // At least kMinValuesForNoise healthy values and noise_sigma > 0.
  double slow_ratio = 0.10;
  double noise_sigmas = 4;

  // reference / bandwidth: how many times slower than the reference; > 0 for bandwidth > 0.
  double Ratio(double bandwidth) const { return reference / bandwidth; }
  // Ratio >= 1 + slow_ratio and, when the noise is known and noise_sigmas > 0, at least
  // noise_sigmas robust deviations below the healthy median.
  bool Slow(double bandwidth) const;
};

// `values`: every measured bandwidth (any unit, larger is faster), each > 0; not empty.
// slow_ratio in (0, 10], noise_sigmas in [0, 100] (0: no noise test); callers validate.
BandwidthReference JudgeBandwidths(std::vector<double> values, double slow_ratio,
                                   double noise_sigmas);

}  // namespace falcon::analysis::detect

#endif  // FALCON_ANALYSIS_DETECT_BANDWIDTH_REFERENCE_H_
