// Localization from pairwise measurements (docs/algorithms.md#pairwise-localization): given one
// bandwidth figure per measured pair of endpoints (nodes, as nccl-tests between two nodes prints
// its bus bandwidth, or ranks, as the controller's link passes measure them), tell a slow
// endpoint (every pair it takes part in is slow: its NIC or the node) from a slow link (one pair
// slow while both of its ends are fine with others), and say when the measurements cannot tell
// them apart, with the extra pair that would decide. Falcon's own method. The reference is the
// upper quartile of the pairs, not their median: a slow node drags n - 1 of the n (n - 1) / 2
// pairs (40% in a 5-node table), so the median can be a slow pair, while the upper quartile stays
// a healthy one as long as fewer than 3/4 of the pairs are slow. Pure.
#ifndef FALCON_ANALYSIS_DETECT_PAIRWISE_H_
#define FALCON_ANALYSIS_DETECT_PAIRWISE_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace falcon::analysis::detect {

// One measured pair. Unordered: (a, b) and (b, a) are the same pair; a measurement repeated for
// a pair keeps its fastest figure (as validation keeps the fastest repeat).
struct PairMeasurement {
  std::string a;
  std::string b;
  double bandwidth = 0;  // Any unit, larger is faster (e.g. busbw in GB/s, or bytes / time); > 0.
  std::string origin;    // Where it came from, for messages (e.g. "line 7").
};

struct PairwiseOptions {
  // A pair is slow when reference / bandwidth >= 1 + slow_ratio (the reference: the upper
  // quartile over all pairs), (0, 10]. Default 0.10, the verdict's link threshold.
  double slow_ratio = 0.10;
  // And only when it lies at least this many robust standard deviations (1.4826 x the median
  // absolute deviation) below the median of the pairs the ratio alone calls healthy, so that the
  // tail of ordinary measurement noise in a large table is not called slow. [0, 100]; 0 turns it
  // off. Ignored when that deviation is 0 or fewer than 8 such pairs were measured.
  double noise_sigmas = 4;

  absl::Status Validate() const;  // kInvalidArgument naming the field.
};

struct EndpointPair {
  std::string a;  // a < b.
  std::string b;
  friend bool operator==(const EndpointPair& x, const EndpointPair& y) {
    return x.a == y.a && x.b == y.b;
  }
};

struct PairwiseFinding {
  enum class Kind {
    kEndpoint,   // `endpoint` is slow: every pair slow, at least 2 of them with partners fine
                 // elsewhere.
    kLink,       // `link` is slow; both ends have a pair that is fine.
    kAmbiguous,  // `link` is slow, but an end has no other pair that is fine: `candidates`.
    kUntested,   // `endpoint` was measured only against slow endpoints: unknown.
  };
  Kind kind = Kind::kLink;
  std::string endpoint;  // kEndpoint and kUntested.
  EndpointPair link;     // kLink and kAmbiguous: the slow pair.
  // reference / bandwidth: of the slow pair, or for kEndpoint the median over its pairs.
  double ratio = 1;
  // kEndpoint: its slow pairs; kUntested: its pairs (all with slow endpoints). Others: empty.
  std::vector<EndpointPair> slow_pairs;
  // kAmbiguous: what could explain it, e.g. {"endpoint n3", "link n1-n3"}.
  std::vector<std::string> candidates;
  // kAmbiguous and kUntested: unmeasured pairs that would decide (an undecided end with an endpoint
  // already seen fine, preferably one whose slow pairs all belong to a slow endpoint). Empty when
  // there is no such endpoint (e.g. only two endpoints were measured).
  std::vector<EndpointPair> deciding_pairs;
};

struct PairwiseResult {
  double reference_bandwidth = 0;  // Upper quartile of the distinct pairs (a measured pair).
  double noise_sigma = 0;          // 1.4826 x the median absolute deviation of the healthy pairs.
  // Pairs faster than the reference by the slow ratio: many of them mean the reference itself
  // is a slow pair (more than 3/4 of the pairs slow) and the findings cannot be trusted.
  int fast_pairs = 0;
  int pairs = 0;  // Distinct pairs measured.
  int slow_pairs = 0;
  int endpoints = 0;
  // Endpoint findings first (slowest first), then links and ambiguous pairs (slowest first).
  // Empty: no slow pair.
  std::vector<PairwiseFinding> findings;
};

// kInvalidArgument naming the origin: an empty endpoint name, a pair of an endpoint with itself,
// a bandwidth that is not a finite number > 0; no measurement at all; bad options.
absl::StatusOr<PairwiseResult> LocalizePairwise(const std::vector<PairMeasurement>& measurements,
                                                const PairwiseOptions& options = {});

// One line per finding, in the words an operator reads ("endpoint n3: all 3 of its pairs slow,
// x2.00 slower than the reference pair ..."); "no slow pair" when there is none.
std::string DescribeFinding(const PairwiseFinding& finding, const std::string& endpoint_word);

}  // namespace falcon::analysis::detect

#endif  // FALCON_ANALYSIS_DETECT_PAIRWISE_H_
