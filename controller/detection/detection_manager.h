// The tracking phase (docs/algorithms.md#online-detector) for every job: one online detector
// (analysis BOCD + verification) per rank on its iteration times and one on the job's series (max
// over ranks, job_series.h). A verified slowdown joins the event being localized (or an active one
// whose verdict came after the change began, or whose plan caused it); otherwise it opens a new
// event beside the active ones and starts its localization (docs/algorithms.md#concurrent-events),
// unless every rank's compute explains it (an environment shift, environment_gate.h: no event).
// A recovery of every series of an event recovers it, or closes it as transient before its verdict
// (docs/algorithms.md#transients). The ranks' iteration times of the job's last
// `resume_window_iterations` iterations are kept in the sample_rows table, and replayed
// into fresh detectors after a restart (events suppressed: they are already stored), so detection
// resumes where it stopped. Also keeps the downsampled job history and the live per-job figures.
// Not thread-safe: controller loop only.
#ifndef FALCON_CONTROLLER_DETECTION_DETECTION_MANAGER_H_
#define FALCON_CONTROLLER_DETECTION_DETECTION_MANAGER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "analysis/detect/online_detector.h"
#include "common/clock.h"
#include "controller/core/unit_of_work.h"
#include "controller/detection/environment_gate.h"
#include "controller/detection/event_manager.h"
#include "controller/detection/job_series.h"
#include "controller/detection/localizer.h"
#include "controller/metrics/controller_metrics.h"
#include "controller/registry/job_registry.h"
#include "controller/settings/settings_manager.h"
#include "controller/store/controller_store.h"
#include "google/protobuf/repeated_field.h"

namespace falcon::controller::detection {

struct DetectionOptions {
  // Detector model; the thresholds come from the job's settings. Not reloadable.
  analysis::detect::OnlineDetectorOptions detector;
  // Iterations of per-rank samples kept for replay after a restart, [32, 1000000]. Default 512.
  int64_t resume_window_iterations = 512;
  // History: one point per this many job iterations (their mean), [1, 1000000]. Default 1.
  int64_t history_stride = 1;
  // Incomplete job iterations waiting for silent ranks before being completed anyway.
  size_t max_pending_job_iterations = 64;

  absl::Status Validate() const;
};

class DetectionManager {
 public:
  // Called inside the unit of work when an event recovered (after the transition is staged).
  using RecoveredFn = std::function<void(falcon::controller::v1::EventRecord*, core::UnitOfWork*)>;
  // Called for each complete job iteration, once per active event of the job.
  using JobIterationFn = std::function<void(falcon::controller::v1::EventRecord*, int64_t,
                                            absl::Duration, core::UnitOfWork*)>;

  DetectionManager(DetectionOptions options, const common::Clock* clock,
                   const registry::JobRegistry* registry, const settings::SettingsManager* settings,
                   EventManager* events, Localizer* localizer, const store::ControllerStore* store,
                   metrics::ControllerMetrics* metrics);

  void set_recovered_callback(RecoveredFn fn) { on_recovered_ = std::move(fn); }
  // Asked before a series' recovery recovers the event: a reason when per-rank evidence says the
  // fail-slow is still there (the recovery is then refused and logged), nullopt to accept.
  using StillSlowFn = std::function<std::optional<std::string>(falcon::controller::v1::EventRecord*,
                                                               core::UnitOfWork*)>;
  void set_still_slow_callback(StillSlowFn fn) { still_slow_ = std::move(fn); }
  void set_job_iteration_callback(JobIterationFn fn) { on_job_iteration_ = std::move(fn); }
  // Called for each applied rank summary, once per active event of the job.
  using RankSummaryFn = std::function<void(falcon::controller::v1::EventRecord*,
                                           const falcon::v1::IterationSummary&, core::UnitOfWork*)>;
  void set_rank_summary_callback(RankSummaryFn fn) { on_rank_summary_ = std::move(fn); }

  // Rebuilds the detectors of every registered job from the stored samples (no events are
  // raised), then resumes the localization of open events. A sample of a rank the job has not
  // registered is skipped (logged once per job). Errors: store errors (DATA_LOSS for a stored
  // sample row that does not parse).
  absl::Status Restore(core::UnitOfWork* uow);

  struct ApplyStats {
    uint64_t applied = 0;
    // Iteration not above the rank's last one: skipped (the first of a streak per rank is logged,
    // `stale summaries`: a new run under a job name in use starts over below it).
    uint64_t stale = 0;
  };
  // Feeds validated summaries of `job`; stages samples, history and event changes in `uow`.
  ApplyStats ApplySummaries(
      const registry::JobEntry& job,
      const google::protobuf::RepeatedPtrField<falcon::v1::IterationSummary>& summaries,
      core::UnitOfWork* uow);
  // Feeds validated raw ops of `rank` (profiling), and counts their kinds per comm for role
  // inference; true when a communicator's inferred role changed (the caller persists the job).
  bool ApplyOps(registry::JobEntry* job, uint32_t rank,
                const google::protobuf::RepeatedPtrField<falcon::v1::OpRecord>& ops);

  // The job's registration changed (rank count for the job series).
  void OnJobChanged(const registry::JobEntry& job);
  // Settings of `job` changed ("" = the defaults: every job).
  void OnSettingsChanged(const std::string& job);
  // Forgets a job's detectors and metric series (retention; the caller deletes its stored
  // samples).
  void RemoveJob(const std::string& job);

  // Live figures for the Control API: latest complete iteration (-1 none) and its time.
  int64_t LastIteration(const std::string& job) const;
  // The newest iteration any rank of the job reported, -1 when none.
  int64_t NewestReported(const std::string& job) const;
  int64_t LastIterationTimeNs(const std::string& job) const;
  // Highest iteration any rank of the job reported (-1 none): directives take effect after it.
  int64_t MaxRankIteration(const std::string& job) const;
  // Detection armed: the iteration at which the job series' detector ended its warm-up
  // (docs/algorithms.md#online-detector: a fault that begins before it is taken for the
  // healthy level), -1 not yet; and how many rank series' detectors have.
  int64_t ArmedIteration(const std::string& job) const;
  uint32_t ArmedRanks(const std::string& job) const;
  // Healthy job iteration time: median of the recent job iterations before the active event.
  absl::Duration Baseline(const std::string& job) const;
  // A change that starts where one of the event's mitigation plans took effect (its effective
  // iteration, within a few iterations) is the plan's doing, not the fail-slow: a speed-up does not
  // recover the event (a fault that clears later shows as a second speed-up), a slowdown (a plan
  // reverted) opens no new event.
  static constexpr int64_t kPlanSpeedupSlack = 3;
  static constexpr int64_t kPlanSpeedupWindow = 10;
  static bool PlanCausedChange(const falcon::v1::Event& event,
                               const analysis::detect::DetectorEvent& ev);
  // Approximate heap bytes of all pipelines (benchmarks).
  size_t MemoryBytes() const;
  size_t series_count() const;

 private:
  // Whether the event's latest plan action reverted its last plan in force (S2, S2L or S3). A full
  // recovery there (back within the threshold of the healthy level) is no plan's doing: the job
  // runs as it did before the fail-slow with no plan, so the fail-slow is gone, whatever the
  // revert's timing. Seen: a fault that cleared under an S2 plan; the plan then measured no faster
  // than the slow level and was reverted, and the job's return to healthy at the revert was taken
  // for the revert's doing, leaving the event MITIGATING for good.
  static bool RevertedToNoPlan(const falcon::v1::Event& event);

  struct RecentTimes {
    // (iteration, arrival Unix ns) of the latest samples, a small ring.
    static constexpr int kSize = 32;
    int64_t iteration[kSize];
    int64_t arrival_ns[kSize];
    int next = 0;
    int count = 0;
    void Add(int64_t it, int64_t ns);
    // Arrival of `it`, or of the oldest kept sample when older.
    int64_t ArrivalOf(int64_t it) const;
  };
  struct Series {
    std::unique_ptr<analysis::detect::OnlineDetector> detector;
    int64_t last_iteration = -1;
    RecentTimes recent;
    // Summaries at or below last_iteration are arriving (logged once per streak).
    bool stale_streak = false;
    // Iteration at which the detector's warm-up ended (armed: a slowdown from then on is
    // detected; one before it becomes the healthy level); -1 not yet.
    int64_t armed_iteration = -1;
  };
  // A slowdown onset of a rank's series, decided on its own summary before every rank reported
  // that iteration, that the environment might still explain (no rank stands out).
  struct PendingOnset {
    std::string series;
    analysis::detect::DetectorEvent detection;
  };
  struct Pipeline {
    std::string job;
    // Oldest iteration of the job's stored samples (store sample_rows); -1 none yet.
    int64_t first_stored = -1;
    absl::flat_hash_map<uint32_t, Series> ranks;
    Series job_series;
    JobSeriesAssembler assembler;
    std::vector<int64_t> baseline_ring;  // Recent job iteration times (ns) without an event.
    size_t baseline_next = 0;
    std::vector<int64_t> recent_ring;  // Recent job iteration times (ns), events or not.
    size_t recent_next = 0;
    int64_t last_iteration = -1;
    int64_t newest_reported = -1;  // The newest iteration of any rank's summary.
    int64_t last_time_ns = 0;
    int64_t bucket_start = -1;
    int64_t bucket_sum_ns = 0;
    int64_t bucket_count = 0;
    int64_t bucket_plan = 0;
    int64_t last_environment_iteration = -1;   // Latest environment shift's iteration.
    std::vector<PendingOnset> pending_onsets;  // Judged once their iteration is complete.
    uint32_t armed_ranks = 0;                  // Rank series whose detector is armed.
    bool every_rank_armed_logged = false;
  };

  Pipeline& PipelineOf(const registry::JobEntry& job);
  Series& RankSeriesOf(Pipeline& p, uint32_t rank);
  std::unique_ptr<analysis::detect::OnlineDetector> NewDetector(const std::string& job) const;
  void Feed(Pipeline& p, const registry::JobEntry& job, uint32_t rank, int64_t iteration,
            int64_t time_ns, int64_t plan_version, int64_t arrival_ns, bool replay,
            core::UnitOfWork* uow);
  // Stages `stored` ((iteration, sample) of a batch's applied summaries; sorted here) as one
  // sample row per iteration and trims the job's stored window.
  void StoreSamples(Pipeline& p, std::vector<std::pair<int64_t, store::RankSample>>* stored,
                    core::UnitOfWork* uow);
  void CompleteJobIteration(Pipeline& p, const JobPoint& point, int64_t arrival_ns, bool replay,
                            core::UnitOfWork* uow);
  // Notes (and logs, for the job series and once every rank series is) a detector that has just
  // ended its warm-up.
  void NoteArmed(Pipeline& p, const std::string& series, Series& s, int64_t iteration, bool replay);
  void OnDetection(Pipeline& p, const std::string& series, const Series& s,
                   const analysis::detect::DetectorEvent& ev, core::UnitOfWork* uow);
  // What `series`' detector made of the time of `iteration`: an event goes to OnDetection
  // (unless `replay`), a refusal is logged and counted (the observation is skipped).
  void OnObservation(Pipeline& p, const std::string& series, const Series& s, int64_t iteration,
                     const absl::StatusOr<std::optional<analysis::detect::DetectorEvent>>& ev,
                     bool replay, core::UnitOfWork* uow);
  // A slowdown onset of `series`: joins an active event, or is an environment shift (when
  // `judge_environment`; docs/algorithms.md#environment-shifts), or opens a new event
  // (`after_environment_shift`: the slowdown an environment shift left, SeriesOnset).
  void Onset(Pipeline& p, const std::string& series, const Series& s,
             const analysis::detect::DetectorEvent& ev, bool judge_environment,
             core::UnitOfWork* uow, bool after_environment_shift = false);
  enum class Judged { kEnvironment, kPart, kIncomplete };
  // kEnvironment when every rank's compute explains the slowdown (logged once per shift and
  // counted); kIncomplete when it does not, yet the decision's job iteration is incomplete, every
  // rank's compute rose somewhat and none stands out (judged again once complete); else kPart.
  Judged JudgeEnvironment(Pipeline& p, const std::string& series,
                          const analysis::detect::DetectorEvent& ev);
  // Pending onsets whose iteration is complete go through Onset again.
  void JudgePendingOnsets(Pipeline& p, core::UnitOfWork* uow);
  // While an environment shift of the job series is remembered: one more job iteration; opens
  // the slowdown the environment no longer explains (environment_gate.h).
  void CheckLeftAfterEnvironment(Pipeline& p, int64_t iteration, int64_t time_ns,
                                 core::UnitOfWork* uow);
  absl::Status Replay(const registry::JobEntry& job);
  // The active event a slowdown onset of `series` joins; nullptr: it opens a new one.
  falcon::controller::v1::EventRecord* EventToJoin(const std::string& job,
                                                   const std::string& series,
                                                   const analysis::detect::DetectorEvent& ev);
  // The newest active event on which `series` is still slow; nullptr none.
  falcon::controller::v1::EventRecord* EventSlowOn(const std::string& job,
                                                   const std::string& series);
  // Median of the recent job iteration times (the level the active events left).
  static absl::Duration RecentLevel(const Pipeline& p);

  const DetectionOptions options_;
  EnvironmentGate environment_;
  const common::Clock* const clock_;
  const registry::JobRegistry* const registry_;
  const settings::SettingsManager* const settings_;
  EventManager* const events_;
  Localizer* const localizer_;
  const store::ControllerStore* const store_;
  metrics::ControllerMetrics* const metrics_;
  RecoveredFn on_recovered_;
  StillSlowFn still_slow_;
  JobIterationFn on_job_iteration_;
  RankSummaryFn on_rank_summary_;
  absl::flat_hash_map<std::string, std::unique_ptr<Pipeline>> pipelines_;
};

}  // namespace falcon::controller::detection

#endif  // FALCON_CONTROLLER_DETECTION_DETECTION_MANAGER_H_
