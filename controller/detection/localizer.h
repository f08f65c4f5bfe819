// Localization of a confirmed fail-slow (docs/algorithms.md#profiling, #validation-passes and
// #verdict): profiling -> pause -> validation -> verdict. For each active event of a job:
//  1. PROFILING: the job's agents are told to profile (ProfilingControl on: device-timed raw ops);
//     the summaries and ops of `profiling_iterations` complete iterations go through the analysis
//     cross-rank blame (CommProfiler), which flags suspicious communicators and blamed ranks.
//     When that is unambiguous (ProfilingVerdict: compute blamed in every profiled iteration, no
//     slow communicator) the verdict (4.) comes from it and the job is never paused
//     (docs/algorithms.md#localization-from-profiling). Likewise when NCCL's profiler plugin
//     timed each peer's transfers and one link is clearly slower than its group's
//     (PeerTimingVerdict, docs/algorithms.md#peer-timing); otherwise that ranking goes into the
//     validation plan's reason.
//  2. PAUSING: suspects are chosen (ranks whose own series slowed down, unless most ranks did, as
//     in synchronous training; blamed ranks; suspicious comms, or else, when profiling blamed
//     nothing, the comms of the suspect ranks); a Pause directive goes to every rank; the
//     controller waits for every rank to apply it (or pause_ack_timeout).
//  3. VALIDATING: every task is sent at once; the trainers run them in rounds of tasks on
//     disjoint nodes (analysis AssignRounds) with a barrier between rounds, so tests never
//     disturb each other: GEMM on the suspect ranks and their peers (unless profiling blamed
//     communication alone), then the link passes of every suspect comm (analysis
//     PlanRingPasses, plus PlanTreePasses on a heap tree when tree_passes is on; one set for
//     communicators over the same ranks); a pair, and a group of more than two ranks on two
//     nodes, with a reference communicator's (docs/algorithms.md#reference-links), and such a
//     group also with its members' smallest communicators that reach a third node
//     (docs/algorithms.md#node-nic-faults). Validation ends when every expected
//     rank answered every task, or after task_timeout without any result (the unanswered tasks
//     are given up). Event.validation_pause_ns: from the pause holding to the Resume.
//  4. Verdict (verdict.h): cause, culprit ranks or links, slowdown; culprits that other active
//     events of the job already named are left out (docs/algorithms.md#concurrent-events); the
//     event becomes LOCALIZED, a Resume directive releases the ranks, and the verdict callback
//     (mitigation) runs. A forced validation of a job without a detected slowdown names no culprit
//     (cause UNKNOWN, what was measured in the reason) and closes the event instead
//     (docs/algorithms.md#verdict); an unknown verdict after every rank's series slowed down is
//     outside load and closes the event as transient (docs/algorithms.md#transients).
// At most one event of a job is localized at a time (the detection manager has a slowdown join it
// meanwhile), so the profiler is per job.
// A recovery or close during localization cancels it (profiling off, Resume when paused). Every
// step is stored in the event record in the unit of work before its messages are sent.
// Not thread-safe: controller loop only.
#ifndef FALCON_CONTROLLER_DETECTION_LOCALIZER_H_
#define FALCON_CONTROLLER_DETECTION_LOCALIZER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/error_counter.h"
#include "controller/core/agent_hub.h"
#include "controller/core/directive_issuer.h"
#include "controller/core/id_allocator.h"
#include "controller/core/unit_of_work.h"
#include "controller/detection/comm_profiler.h"
#include "controller/detection/event_manager.h"
#include "controller/detection/verdict.h"
#include "controller/registry/job_registry.h"
#include "controller/settings/settings_manager.h"

namespace falcon::controller::detection {

struct LocalizationOptions {
  // Complete job iterations profiled before validation, [1, 1000]. Default 3.
  int profiling_iterations = 3;
  // Profiling ends after this long even with fewer iterations. Default 30 s (the artifact: 20 s).
  absl::Duration profiling_timeout = absl::Seconds(30);
  // The pause applies this many iterations after the job's latest one, [0, 1000]. Default 2.
  int pause_lead_iterations = 2;
  // Validation starts after this long even if not every rank acknowledged the pause.
  absl::Duration pause_ack_timeout = absl::Seconds(30);
  // Validation is given up after this long without any result; its unanswered tasks time out.
  absl::Duration task_timeout = absl::Seconds(30);
  // Pause.max_duration_ns: the shims release themselves after this long. (0, 600 s].
  absl::Duration pause_max_duration = absl::Seconds(180);
  // GEMM test and link message size (the paper: FP16/FP32 GEMM, 16-64 MB, 3 repetitions).
  // GEMM 1024 by default: a CPU executor (the reference trainer's) refuses 4096^3 x 4 runs
  // (5.5e11 FLOP); set 4096 (--validation_gemm_size) for GPU jobs.
  uint32_t gemm_size = 1024;
  uint32_t repeats = 3;
  uint64_t link_bytes = 64ull << 20;
  // Also validate the links of a binary (heap) tree over each suspect comm (NCCL may use trees).
  bool tree_passes = true;
  // Also validate every planned link the other way round (Reversed passes: twice the link
  // tasks), so that a one-way fault is found with its direction.
  bool both_directions = true;
  VerdictOptions verdict;

  absl::Status Validate() const;
};

class Localizer {
 public:
  // Pauses of one validation re-issued after some rank rejected them as late.
  static constexpr int kMaxLatePauses = 2;
  // Called when a verdict has been staged (event LOCALIZED), inside the same unit of work.
  using VerdictCallback =
      std::function<void(falcon::controller::v1::EventRecord* event, core::UnitOfWork* uow)>;
  // An iteration of the job, -1 when none: its latest complete one (`progress`), or the newest
  // any of its ranks reported (`newest_reported`).
  using ProgressFn = std::function<int64_t(const std::string& job)>;

  // `errors` (not owned; nullptr: not counted) counts the timeouts it logs.
  Localizer(LocalizationOptions options, const common::Clock* clock, core::IdAllocator* ids,
            core::AgentHub* hub, core::DirectiveIssuer* directives, EventManager* events,
            registry::JobRegistry* registry, const settings::SettingsManager* settings,
            common::ErrorCounter* errors, ProgressFn progress, ProgressFn newest_reported);

  void set_verdict_callback(VerdictCallback cb) { on_verdict_ = std::move(cb); }

  // The event was just confirmed: start profiling its job.
  void Start(falcon::controller::v1::EventRecord* event, core::UnitOfWork* uow);
  // An operator forced validation: pause and validate every rank and comm now.
  void StartForced(falcon::controller::v1::EventRecord* event, core::UnitOfWork* uow);
  // After a controller restart: an event still localizing starts over from profiling (ranks
  // paused before the restart are released first).
  void Resume(falcon::controller::v1::EventRecord* event, core::UnitOfWork* uow);

  void OnJobIteration(const std::string& job, int64_t iteration, int64_t iteration_time_ns,
                      core::UnitOfWork* uow);
  // A validation result (validated). Results for unknown or finished tasks are ignored.
  void OnValidationResult(const falcon::v1::ValidationResult& result, core::UnitOfWork* uow);
  // A directive changed state (APPLIED / REJECTED / TIMED_OUT).
  void OnDirectiveState(const falcon::v1::DirectiveRecord& record, core::UnitOfWork* uow);
  // Deadlines of the current phases.
  void Tick(absl::Time now, core::UnitOfWork* uow);
  // Ends the event's localization (it recovered or closed).
  void Cancel(falcon::controller::v1::EventRecord* event, core::UnitOfWork* uow);
  // The agent (re)connected with `job`: resend the profiling state.
  void OnAgentJoined(const std::string& agent_id, const registry::JobEntry& job);

  // The job's profiler while it is profiled; nullptr otherwise.
  CommProfiler* Profiler(const std::string& job);

 private:
  using EventRecord = falcon::controller::v1::EventRecord;

  void BeginProfiling(EventRecord* event, core::UnitOfWork* uow);
  void FinishProfiling(EventRecord* event, core::UnitOfWork* uow);
  // Plans the validation (GEMM when `run_gemm`, the passes of every suspect comm, in rounds)
  // and pauses the job.
  void PlanAndPause(EventRecord* event, std::vector<uint32_t> suspect_ranks,
                    std::vector<uint64_t> suspect_comms, bool run_gemm, const std::string& why,
                    core::UnitOfWork* uow);
  void DispatchNext(EventRecord* event, core::UnitOfWork* uow);
  // Judges the event's validation results, then StageVerdict.
  void GiveVerdict(EventRecord* event, const std::string& note, core::UnitOfWork* uow);
  // The verdict profiling alone gives, when it is unambiguous: not forced, every profiling
  // iteration judged, no suspicious communicator, an even micro-batch plan in force, and every
  // blamed rank blamed for compute in each judged iteration by at least 1 + gemm_slow_ratio, none
  // of them another active event's culprit (docs/algorithms.md#localization-from-profiling).
  // std::nullopt: validate.
  std::optional<Verdict> ProfilingVerdict(const EventRecord& event, const ProfileResult& profile);
  // The verdict per-peer transfer timing gives (docs/algorithms.md#peer-timing): not forced, every
  // profiling iteration judged, no rank blamed for compute, and at least one link slower than its
  // group's reference by the verdict's link_slow_ratio; the slow links are the culprits, a rank
  // all of whose measured links are slow an endpoint. `ranking_note` gets the ranking's top links
  // whenever there were peer transfers (for the validation plan's reason). std::nullopt: validate.
  std::optional<Verdict> PeerTimingVerdict(const EventRecord& event, const ProfileResult& profile,
                                           std::string* ranking_note);
  // Records `v` on the event (LOCALIZED, or CLOSED when it names nothing to mitigate), releases a
  // held pause and runs the verdict callback.
  void StageVerdict(EventRecord* event, Verdict v, const std::string& note, core::UnitOfWork* uow);
  void SendProfiling(const registry::JobEntry& job, bool enabled, const std::string& only_agent);
  // Pauses the job for `event`'s validation (PHASE_PAUSING; EventRecord.late_pauses doubles the
  // lead each time).
  void IssuePause(EventRecord* event, const registry::JobEntry& job, const std::string& reason,
                  core::UnitOfWork* uow);
  void SendTask(const falcon::v1::ValidationTask& task, const registry::JobEntry& job);
  void Release(EventRecord* event, const std::string& reason, core::UnitOfWork* uow);
  void SetJobState(const std::string& job, falcon::v1::JobState state, core::UnitOfWork* uow);
  EventRecord* EventOfTask(uint64_t task_id);
  // Drops from `v` the culprits other active events of the job named (a concurrent event looks for
  // a new culprit; a named link between two nodes stands for every rank pair across that node
  // pair, either way); the cause and the ratio follow what is left (the ratio from Verdict's
  // per-culprit ratios where it has them). Returns what was dropped, for the reason; `owners`
  // (optional) gets the ids of the events whose culprits were dropped, ascending.
  std::string ExcludeKnownCulprits(const EventRecord& event, Verdict* v,
                                   std::vector<uint64_t>* owners = nullptr);
  // Validation (GEMM on 2+ ranks) found no culprit, and every rank's own series slowed down, or
  // the event is the slowdown an environment shift left (EventRecord.after_environment_shift:
  // every rank's compute had risen alike, and now no part is slower than its peers).
  bool EveryRankSlowedAlike(const EventRecord& event, const Verdict& v) const;

  const LocalizationOptions options_;
  const common::Clock* const clock_;
  core::IdAllocator* const ids_;
  core::AgentHub* const hub_;
  core::DirectiveIssuer* const directives_;
  EventManager* const events_;
  registry::JobRegistry* const registry_;
  const settings::SettingsManager* const settings_;
  common::NullErrorCounter no_errors_;
  common::ErrorCounter* const errors_;
  ProgressFn progress_;
  ProgressFn newest_reported_;
  VerdictCallback on_verdict_;
  absl::flat_hash_map<std::string, std::unique_ptr<CommProfiler>> profilers_;
};

}  // namespace falcon::controller::detection

#endif  // FALCON_CONTROLLER_DETECTION_LOCALIZER_H_
