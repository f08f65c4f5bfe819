// The F1 score of the Turing Change Point Detection benchmark (van den Burg & Williams,
// arXiv:2003.06222; TCPDBench analysis/scripts/metrics.py), used to score change points found on
// TCPD series against several human annotators.
//
// Index 0 is added to the predictions and to every annotator's set (a series always starts a
// segment). An annotation is a true positive when an unused prediction lies within `margin` of
// it; annotations are taken in ascending order and each takes its nearest unused prediction
// (the smaller index on ties), so matching is one-to-one.
//   precision = |TP against the union of all annotations| / |predictions|
//   recall    = mean over annotators of |TP_k| / |annotations_k|
//   F1        = 2 P R / (P + R), 0 when P + R = 0.
#ifndef FALCON_ANALYSIS_DETECT_TCPD_F1_H_
#define FALCON_ANALYSIS_DETECT_TCPD_F1_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace falcon::analysis::detect {

struct F1Score {
  double f1 = 0;
  double precision = 0;
  double recall = 0;
};

// `annotations`: one list of change-point indices per annotator (a list may be empty).
// kInvalidArgument: no annotators, a negative index, or margin < 0.
absl::StatusOr<F1Score> TcpdF1(const std::vector<std::vector<int64_t>>& annotations,
                               absl::Span<const int64_t> predictions, int64_t margin = 5);

}  // namespace falcon::analysis::detect

#endif  // FALCON_ANALYSIS_DETECT_TCPD_F1_H_
