// What an e2e test prints when an assertion fails: the job's iteration-time series and its event
// timeline as the controller's Control API returns them, so a failure shows the run that caused
// it (a noise burst, a late verdict, a plan that did not pay off) without rerunning.
#ifndef FALCON_TESTS_E2E_EVIDENCE_H_
#define FALCON_TESTS_E2E_EVIDENCE_H_

#include <string>
#include <vector>

#include "proto/falcon/v1/control.grpc.pb.h"

namespace falcon::tests::e2e {

// The iteration-time series, 10 points a line: "iteration:seconds[pN]" (pN: a plan version other
// than 0). `points` in any order; printed ascending by iteration.
std::string FormatSeries(std::vector<falcon::v1::HistoryPoint> points);

// One line per event: id, state, cause, ranks, links, onset / alarm / verdict / recovery
// iterations, healthy and slow iteration times, then its actions (strategy, iteration, directive,
// revert, reason).
std::string FormatTimeline(const std::vector<falcon::v1::Event>& events);

// Series and timeline of `job` fetched from `stub` (5 s deadline per call); the error text when a
// call fails.
std::string JobEvidence(falcon::v1::Control::Stub& stub, const std::string& job);

// The last `n` bytes of the file at `path` ("" when unreadable).
std::string FileTail(const std::string& path, size_t n = 3000);

}  // namespace falcon::tests::e2e

#endif  // FALCON_TESTS_E2E_EVIDENCE_H_
