// Robust statistics shared by detection, localization, mitigation and the benchmarks: median,
// median absolute deviation (MAD) and quantiles of a sample. Every function takes its sample by
// value or span and leaves the caller's data untouched; none allocates more than one copy.
//
// Conventions (the one definition every module uses):
//  - Median of an even-sized sample is the mean of its two middle values, computed without
//    overflow near the largest doubles; of an empty sample it is 0 (callers that must tell an
//    empty sample apart check the size first).
//  - MAD is the unscaled median of |x - median(x)|; multiply by kMadToSigma (1.4826) for a
//    consistent estimate of the standard deviation of normal data.
//  - Quantile(q) uses linear interpolation between closest ranks (type 7 of Hyndman & Fan, the
//    default of R and NumPy); q is clamped to [0, 1].
#ifndef FALCON_COMMON_STATS_H_
#define FALCON_COMMON_STATS_H_

#include <cstdint>
#include <vector>

#include "absl/time/time.h"
#include "absl/types/span.h"

namespace falcon::common {

// 1 / Phi^-1(3/4): MAD * kMadToSigma estimates sigma for normally distributed data.
inline constexpr double kMadToSigma = 1.4826;

double Median(absl::Span<const double> values);
// Integer median: of an even-sized sample, the mean of the two middle values rounded toward
// negative infinity (no overflow).
int64_t Median(absl::Span<const int64_t> values);
absl::Duration Median(absl::Span<const absl::Duration> values);

// Leave-one-out medians: out[i] is Median(values without values[i]) (0 when only values[i] is
// there; empty in, empty out). One sort, O(m log m) for the m leave-one-out medians that m
// separate Median calls would take O(m^2) for; the results are the same.
std::vector<double> MediansExcludingEach(absl::Span<const double> values);

// Median absolute deviation around the sample's median; 0 for fewer than two values.
double Mad(absl::Span<const double> values);

// The q-quantile (linear interpolation, type 7); 0 for an empty sample.
double Quantile(absl::Span<const double> values, double q);

// Arithmetic mean without overflow for finite values near the largest doubles; 0 when empty.
double Mean(absl::Span<const double> values);

}  // namespace falcon::common

#endif  // FALCON_COMMON_STATS_H_
