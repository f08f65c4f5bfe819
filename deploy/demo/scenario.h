// Scenario definitions shared by the demo (falcon_demo) and the end-to-end suite (tests/e2e):
// a job layout, an iteration budget and the fail-slows injected into the reference trainer
// (collective/fault/fault_spec.h syntax), with what Falcon is expected to find.
//
// Fault windows are fractions of the run's iteration budget, so one scenario scales from a short
// test run to the full demo. Ranks follow the trainer's default placement (rank r at
// dp = r % D, pp = r / D) and the launcher's node grouping (ranks [k * R/N, (k+1) * R/N) on
// node k), so a link fault is chosen between consecutive pipeline stages on different nodes.
#ifndef FALCON_DEPLOY_DEMO_SCENARIO_H_
#define FALCON_DEPLOY_DEMO_SCENARIO_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace falcon::deploy::demo {

// DP x PP of the reference trainer, e.g. "4x2".
struct Layout {
  int dp = 4;
  int pp = 2;
  int world() const { return dp * pp; }
  std::string ToString() const;  // "4x2".
};

// Parses "DxP" (D, P >= 1, D * P <= 64). kInvalidArgument naming --layout.
absl::StatusOr<Layout> ParseLayout(absl::string_view text);

// How a scenario's faults reach the job: kInProcess passes them to the trainer (falcon_train
// --faults: the trainer stretches its own device time and shapes its own messages; for the
// loopback cluster without CAP_NET_ADMIN, and unit tests); kKernel applies them from outside the
// job with the kernel fault driver (chaos/: a cgroup CPU quota, tc bandwidth caps on the nodes'
// interfaces) on a netns cluster, where nothing in the job knows about them.
enum class FaultInjection { kInProcess, kKernel };
const char* FaultInjectionName(FaultInjection f);  // "in-process", "kernel".

// The emulated device's CPU demand in cores whether busy or idle (falcon_train
// --emulated_device_duty, which the runner passes on the netns cluster; trainer/README.md): what
// a kernel compute fault of_nominal divides by its factor.
inline constexpr double kEmulatedDeviceDuty = 0.1;

// kNic: a whole node's interface degraded (kernel injection only).
enum class FaultKind { kCompute, kLink, kContention, kNic };
const char* FaultKindName(FaultKind kind);  // "compute", "link", "contention", "nic".

// One injected fail-slow, active in iterations [from_iteration, to_iteration).
struct InjectedFault {
  FaultKind kind = FaultKind::kCompute;
  int rank = -1;              // Compute / contention: the slowed global rank.
  int src_rank = -1;          // Link: sending global rank.
  int dst_rank = -1;          // Link: receiving global rank.
  double factor = 1.0;        // Compute: time multiplier (>= 1).
  double delay_ms = 0.0;      // Link: extra latency per message.
  double bandwidth_mbps = 0;  // Link: bandwidth cap in Mbit/s; 0 uncapped.
  int workers = 1;            // Contention: stress-ng CPU workers.
  int node = -1;              // Nic: the degraded node's index (node<K>).
  FaultInjection injection = FaultInjection::kInProcess;
  int64_t from_iteration = 0;
  int64_t to_iteration = 0;
  // Whether Falcon should raise an event for it (false for sub-threshold blips).
  bool expect_event = true;
  // Kernel compute: the device thread capped at kEmulatedDeviceDuty / factor, its nominal demand
  // over F, instead of slowdown=F (its CPU use when applied, over F). On a busy machine that use
  // is below the demand, and slowdown=F slows the device by more than F once the load eases: a
  // x1.05 blip measured the device at 0.082 cores and read x1.25 on the rank.
  bool of_nominal = false;
  // Cause name Falcon should report ("COMPUTE" or "COMMUNICATION").
  std::string expected_cause;
  // Strategy the mitigation should reach ("S2", "S3"; empty: no expectation).
  std::string expected_strategy;
  // Kernel injection: why the fault driver could not apply it (its error); empty when it was
  // applied or never due. Set by the runner; a fault not applied is neither missed nor unreached.
  std::string not_applied;

  // In-process: the item in fault_spec.h syntax, e.g. "compute:rank=2,factor=1.5,from=100,to=300".
  // Kernel: the fault driver's spec (chaos/), without a time window (the runner applies it at
  // from_iteration and removes it at to_iteration), e.g. "link:src_rank=1,dst_rank=2,rate=4mbit".
  std::string ToSpec() const;
  // "compute ×1.5 on rank 2, iterations [100, 300)".
  std::string Describe() const;
};

struct Scenario {
  std::string name;
  std::string description;
  Layout layout;
  int nodes = 4;
  int64_t iterations = 0;  // Training steps of the run.
  std::vector<InjectedFault> faults;
  // Restart the controller when the job reaches this iteration; -1 never.
  int64_t restart_controller_at_iteration = -1;
  // Whether the trainer needs --pin_cpus (contention faults).
  bool pin_cpus = false;
  // Extra falcon_train flags (after the runner's, so they win).
  std::vector<std::string> train_args;
  FaultInjection injection = FaultInjection::kInProcess;
  // S4's cost in the escalation for the scenario's job (Settings.s4_cost_seconds, set through
  // the Control API with the run's other settings), > 0 where the scenario expects S4: the
  // demo's small model writes and reads its checkpoint in milliseconds and restarts in seconds,
  // where the controller's default (600 s) is sized for a large model and would not be reached
  // within a run. 0: the default.
  double s4_cost_seconds = 0;

  // All faults joined with "; " (empty when healthy).
  std::string FaultSpec() const;
};

// Names accepted by MakeScenario, default first: "compute-link", "healthy", "compute", "link"
// (a pipeline link), "dp-link" (a link inside a DP all-reduce group), "nic" (a node's whole NIC;
// kernel injection only), "nic-s4" (a node's NIC crawling until the escalation restarts the job
// without it; kernel only), "clears" (a compute fault that clears: plans reverted), "blip",
// "contention", "restart".
std::vector<std::string> ScenarioNames();

// Kernel fault sizes on the netns cluster (veth NICs, the demo's small model): a pipeline link's
// activations and a DP communicator's all-reduce share of a few hundred KiB per iteration queue
// behind these caps; a crawling NIC slows the job far beyond what S2 / S3 recover.
inline constexpr double kKernelPipelineLinkMbps = 0.5;
inline constexpr double kKernelDpLinkMbps = 2;
inline constexpr double kKernelNicMbps = 1;
inline constexpr double kKernelCrawlingNicMbps = 0.25;
// S4's cost for the nic-s4 scenario: the demo's small model writes and reads its checkpoint in
// milliseconds, and the trainer's relaunch on the survivors (processes, Gloo rendezvous in the
// namespaces, registration) takes a few seconds; with the margin, still reached within a dozen
// crawling iterations of the verdict.
inline constexpr double kDemoS4CostSeconds = 10;

// Fewest training steps a scenario runs (healthy baseline, fault windows, recovery).
inline constexpr int64_t kMinScenarioIterations = 100;
// Most training steps a scenario runs (--duration's 2 h at the fastest iterations is well under).
inline constexpr int64_t kMaxScenarioIterations = 1'000'000;

// Builds scenario `name` for `layout` on `nodes` emulated nodes over `iterations` steps.
// kInvalidArgument naming --scenario (unknown name, listing the valid ones), --layout (fewer than
// 2 DP groups or 2 stages where the scenario needs them) or nodes (not dividing the world, or too
// few for a link between nodes), or iterations (outside [kMinScenarioIterations,
// kMaxScenarioIterations]).
// With kKernel injection faults are sized for the netns cluster (bandwidth caps instead of
// per-message delays; a compute fault as a CPU quota); nic and nic-s4 need it (kInvalidArgument).
absl::StatusOr<Scenario> MakeScenario(absl::string_view name, const Layout& layout, int nodes,
                                      int64_t iterations,
                                      FaultInjection injection = FaultInjection::kInProcess);

// Emulated node index of `rank` when `world` ranks are grouped into `nodes` nodes.
int NodeOf(int rank, int world, int nodes);

}  // namespace falcon::deploy::demo

#endif  // FALCON_DEPLOY_DEMO_SCENARIO_H_
