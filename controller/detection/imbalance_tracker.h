// Live workload imbalance of every job (docs/algorithms.md#workload-imbalance): the compute time
// of the ranks' iteration summaries over the last `window` iterations, per micro-batch (the plan
// in force gives each DP group its count, so an S2 plan is not mistaken for imbalance), grouped
// by pipeline stage (RankInfo.pp_index), analysed by analysis/detect/imbalance every `every` new
// iterations. What it finds is reported (Control API Job.imbalance, falconctl, the
// falcon_controller_workload_imbalance gauge) and keeps mitigation from acting against a rank
// that is not a persistent straggler (IsBlameless). Not thread-safe: controller loop only.
#ifndef FALCON_CONTROLLER_DETECTION_IMBALANCE_TRACKER_H_
#define FALCON_CONTROLLER_DETECTION_IMBALANCE_TRACKER_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "analysis/detect/blame.h"
#include "analysis/detect/imbalance.h"
#include "controller/registry/job_registry.h"
#include "proto/falcon/v1/common.pb.h"
#include "proto/falcon/v1/control.pb.h"

namespace falcon::controller::detection {

struct ImbalanceTrackerOptions {
  int64_t window = 64;  // Iterations kept per job, [analysis.min_steps, 100000].
  int64_t every = 16;   // New iterations between analyses, [1, window].
  analysis::detect::ImbalanceOptions analysis;

  absl::Status Validate() const;  // kInvalidArgument naming the field.
};

class ImbalanceTracker {
 public:
  explicit ImbalanceTracker(ImbalanceTrackerOptions options) : options_(std::move(options)) {}

  // One rank's summary of `job` (ranks without a registered stage are left out). Returns true
  // when this summary led to a new analysis (the report may or may not differ).
  bool Add(const registry::JobEntry& job, const falcon::v1::IterationSummary& summary);

  // The latest analysis of `job`; nullptr before the first (fewer than min_steps iterations).
  const analysis::detect::ImbalanceReport* Report(const std::string& job) const;
  // True when the latest analysis of `job` shows data-dependent jitter, or a stage imbalance of
  // `rank`'s stage, and `rank` was not slow (above its stage's median by the slow ratio) in most
  // of the kept iterations from `since_iteration` on (an event's onset), nor in each of its
  // newest kPersistentStreak: slowness there is the work, not the rank, and no mitigation should
  // move work off it or evict it. `why` (may be null) says which.
  bool IsBlameless(const std::string& job, uint32_t rank, int64_t since_iteration,
                   std::string* why) const;
  // Newest iterations in a row slow enough to blame a rank whatever came before (jitter that
  // slows a rank in a third of its iterations does so 4 times running in ~1% of windows).
  static constexpr int kPersistentStreak = 4;

  void RemoveJob(const std::string& job) { jobs_.erase(job); }

  // The report as the Control API shows it.
  static falcon::v1::WorkloadImbalance ToProto(const analysis::detect::ImbalanceReport& report,
                                               const analysis::detect::ImbalanceOptions& options);
  const ImbalanceTrackerOptions& options() const { return options_; }

 private:
  struct JobState {
    std::map<int64_t, analysis::detect::BlameInput> steps;  // By iteration, the newest last.
    int64_t new_iterations = 0;
    std::map<uint32_t, int64_t> stage_of;  // Rank -> its stage in the kept iterations.
    std::optional<analysis::detect::ImbalanceReport> report;
  };

  ImbalanceTrackerOptions options_;
  std::map<std::string, JobState> jobs_;
};

}  // namespace falcon::controller::detection

#endif  // FALCON_CONTROLLER_DETECTION_IMBALANCE_TRACKER_H_
