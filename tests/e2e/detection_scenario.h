// The detection scenario of tls_e2e_test: the netns cluster set up as the demo's
// (kernel_cluster.h), a x1.5 compute fault on rank 5 from iteration kDetectionFaultFrom applied by
// the kernel fault driver, and mitigation off, so the verdict is judged on its own. The helpers
// read the controller through the cluster's own Control stub (TLS when the cluster runs it) and
// print the figures of a verdict (alarm delay, verdict delay, wall time) for the report.
#ifndef FALCON_TESTS_E2E_DETECTION_SCENARIO_H_
#define FALCON_TESTS_E2E_DETECTION_SCENARIO_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/falcon/v1/control.grpc.pb.h"
#include "tests/e2e/kernel_cluster.h"
#include "tests/harness/local_cluster.h"

namespace falcon::tests::e2e {

// The iteration from which the scenarios inject their fault: 50 iterations after detection turns
// on (KernelClusterOptions.warmup_iterations = 30). The online detector first needs a settled
// warm-up (online_detector.h: 20 observations, longer on a noisy machine); a fault that starts
// before it settles becomes part of the baseline and is never proposed.
inline constexpr int kDetectionFaultFrom = 80;
// A deadline, not a measurement: a verdict takes ~20-40 s after the fault here; a machine slowed
// down by outside load takes longer, and only a missing verdict should fail a test.
inline constexpr absl::Duration kVerdictWait = absl::Seconds(180);

// The scenario's options for job `job` (set `tls` on the result for the TLS variant).
KernelClusterOptions DetectionScenario(const std::string& job);

// The events of `job` (none when the call fails; 5 s deadline).
std::vector<falcon::v1::Event> ListEvents(harness::LocalCluster& cluster, const std::string& job);

// One line per directive of `job` with its state and reason (the pause names the profiling's
// suspects); "(ListDirectives failed)" when the call fails.
std::string DirectiveReasons(harness::LocalCluster& cluster, const std::string& job);

// Whether `e` has a verdict (LOCALIZED or later).
bool Localized(const falcon::v1::Event& e);

// The events in protobuf text format, one after another; "(no events)" when empty.
std::string Describe(const std::vector<falcon::v1::Event>& events);

// Events of `job` that began more than 5 iterations before `fault_from`: false alarms.
int FalseAlarms(harness::LocalCluster& cluster, const std::string& job, int fault_from);

// Polls the events of `job` every 0.5 s for up to `wait` until one satisfies `want` (stored in
// *found; true), or the trainer has exited (false). *last: the events seen last.
bool AwaitEvent(harness::LocalCluster& cluster, const std::string& job,
                const std::function<bool(const falcon::v1::Event&)>& want, absl::Duration wait,
                falcon::v1::Event* found, std::vector<falcon::v1::Event>* last);

// Everything a failed wait for a verdict shows: `last` events, the job's series and timeline, the
// directives' reasons and the tails of the trainer's and controller's logs.
std::string MissingVerdictEvidence(harness::LocalCluster& cluster, const std::string& job,
                                   const std::vector<falcon::v1::Event>& last);

// Prints one line "FIGURES cause=... ranks=[...] ... alarm_delay_iterations=N alarm_delay_s=X
// verdict_delay_s=Y wall_until_verdict_s=Z" to stdout: the event's cause and culprit, healthy and
// slow iteration times, onset / alarm / verdict iterations, the alarm's delay after the onset (in
// iterations and seconds), the verdict's after the alarm, and `wall` (the test's wall time until
// the verdict).
void PrintFigures(const falcon::v1::Event& e, int fault_from, absl::Duration wall);

}  // namespace falcon::tests::e2e

#endif  // FALCON_TESTS_E2E_DETECTION_SCENARIO_H_
