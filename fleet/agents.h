// Simulated node agents of a fleet run, as one process runs them: each agent is a real gRPC client
// of the controller (its own connection and Telemetry.Connect stream), registers its node's ranks
// in its hello, streams one batch of iteration summaries per iteration (plus the raw op records
// of its profiled ranks), and answers what the controller sends the way an agent with cooperating
// shims does: directives are acknowledged per target rank once they reach the ranks (after
// `directive_latency`) and take effect at their effective iteration (a Pause holds the ranks
// there until a Resume); validation tasks are answered after `gemm_latency` / `link_latency` with
// the times of the job's model (fleet/model.h).
//
// Iterations are driven in wall time: one every `period` after Start(). What the agents saw
// (acknowledgement round trips, validation tasks, directive deliveries) goes into a FleetReport.
#ifndef FALCON_FLEET_AGENTS_H_
#define FALCON_FLEET_AGENTS_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "fleet/model.h"
#include "fleet/scenario.h"

namespace falcon::fleet {

// Acknowledgement round trips in log buckets: bucket i holds [1 us x 1.05^i, 1 us x 1.05^(i+1)).
class LatencyHistogram {
 public:
  static constexpr int kBuckets = 400;
  void Add(absl::Duration d);
  void Merge(const LatencyHistogram& o);
  uint64_t count() const;
  // The q-quantile (upper bucket bound), 0 when empty.
  absl::Duration Quantile(double q) const;
  std::vector<uint64_t>& buckets() { return buckets_; }

 private:
  std::vector<uint64_t> buckets_ = std::vector<uint64_t>(kBuckets, 0);
};

// What the agents of one or more processes saw. Times are Unix epoch ns (all processes share the
// machine's clock).
struct FleetReport {
  uint64_t summaries = 0;
  uint64_t batches = 0;
  uint64_t ops = 0;
  uint64_t foreign = 0;  // Directives, tasks or profiling for a job the agent is not part of.
  // Streams that ended before the agent closed them (the controller went away or closed them):
  // the simulated agents do not reconnect, so a run with any is not a measurement.
  uint64_t streams_lost = 0;
  LatencyHistogram ack_rtt;
  struct Task {
    std::string kind;  // "gemm" or "link".
    int64_t first_ns = 0;
  };
  std::map<std::pair<std::string, uint64_t>, Task> tasks;  // (job, task id).
  struct Delivery {
    std::string kind;  // pause, resume, s2, s3, s4, profiling.
    int64_t first_ns = 0;
    int64_t last_ns = 0;
    uint64_t agents = 0;
  };
  std::map<std::pair<std::string, uint64_t>, Delivery> directives;  // (job, directive id).

  void Merge(const FleetReport& o);
  std::string Serialize() const;
  static absl::StatusOr<FleetReport> Parse(const std::string& text);
};

struct AgentsOptions {
  std::string target;  // Controller address host:port.
  absl::Duration period = absl::Seconds(1);
  absl::Duration directive_latency = absl::Milliseconds(20);
  absl::Duration gemm_latency = absl::Milliseconds(50);
  absl::Duration link_latency = absl::Milliseconds(100);
  uint64_t seed = 1;
  NoiseModel noise;
  bool peer_timing = false;  // Raw ops carry peer transfers (JobModel::set_peer_timing).
};

class Agent;

class AgentProcess {
 public:
  // Simulates the nodes [from, to) of scenario.Nodes().
  AgentProcess(const Scenario& scenario, size_t from, size_t to, AgentsOptions options);
  ~AgentProcess();

  // Connects every agent (hello with its registration, waits for the ControllerHello).
  absl::Status ConnectAll(absl::Duration timeout);
  // Every agent sends a heartbeat (while waiting for the start).
  void Heartbeat();
  // Drives iterations until `stop` is set; then ends the streams.
  void Run(const std::atomic<bool>& stop);
  FleetReport Report();

  // For the agents.
  void Later(absl::Duration delay, std::function<void()> fn);
  FleetReport& report() ABSL_EXCLUSIVE_LOCKS_REQUIRED(report_mu_) { return report_; }
  absl::Mutex& report_mu() ABSL_LOCK_RETURNED(report_mu_) { return report_mu_; }
  const AgentsOptions& options() const { return options_; }

 private:
  void TimerLoop();

  AgentsOptions options_;
  std::vector<std::unique_ptr<JobModel>> models_;
  std::vector<std::unique_ptr<Agent>> agents_;
  absl::Mutex report_mu_;
  FleetReport report_ ABSL_GUARDED_BY(report_mu_);

  absl::Mutex timer_mu_;
  std::multimap<absl::Time, std::function<void()>> timers_ ABSL_GUARDED_BY(timer_mu_);
  bool timer_stop_ ABSL_GUARDED_BY(timer_mu_) = false;
  std::thread timer_;
};

}  // namespace falcon::fleet

#endif  // FALCON_FLEET_AGENTS_H_
