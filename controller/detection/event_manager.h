// Fail-slow events and their life (control.proto EventState): suspected -> confirmed ->
// localized -> mitigating -> recovered or closed. A job may have several active events
// (docs/algorithms.md#concurrent-events), each with its own culprit and escalation; at most one of
// them is being localized at a time, and a series that turns slow meanwhile joins that one (the
// detection manager decides). An event recovers when every series that joined it has recovered;
// one whose series all recovered before its verdict is closed as transient. Every transition is
// staged in the unit of work with the full record; watchers and metrics see it after the commit.
// Not thread-safe: controller loop only.
#ifndef FALCON_CONTROLLER_DETECTION_EVENT_MANAGER_H_
#define FALCON_CONTROLLER_DETECTION_EVENT_MANAGER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/time/time.h"
#include "analysis/detect/online_detector.h"
#include "common/clock.h"
#include "controller/core/id_allocator.h"
#include "controller/core/unit_of_work.h"
#include "controller/metrics/controller_metrics.h"
#include "controller/store/records.pb.h"
#include "proto/falcon/v1/control.pb.h"

namespace falcon::controller::detection {

// Name of a series in EventRecord.onset_series: "job" or "rank/<r>".
inline constexpr char kJobSeries[] = "job";
std::string RankSeries(uint32_t rank);
// The rank of a "rank/<r>" series; -1 for "job" or a malformed name.
int64_t SeriesRank(const std::string& series);

// A verified slowdown on one series, as the detection pipeline reports it.
struct SeriesOnset {
  std::string series;                         // kJobSeries or RankSeries(r).
  analysis::detect::DetectorEvent detection;  // kind == kSlowdown; means in seconds.
  absl::Time onset_time;                      // When the onset iteration's sample arrived.
  int64_t job_iteration = -1;                 // Job iteration when it was confirmed.
  absl::Duration job_baseline;  // Healthy job iteration time before it (lost-time baseline).
  // The slowdown left after an environment shift (EventRecord.after_environment_shift).
  bool after_environment_shift = false;
};

class EventManager {
 public:
  using Watcher = std::function<void(const falcon::v1::Event&)>;

  EventManager(const common::Clock* clock, core::IdAllocator* ids,
               metrics::ControllerMetrics* metrics);

  // Replaces the events with stored ones (ControllerStore::LoadEvents()); re-derives the active
  // events of each job and the metrics gauges.
  void Load(const std::vector<falcon::controller::v1::EventRecord>& records);

  // Opens an event for `job` from `onset`: records SUSPECTED (at the onset) and CONFIRMED (at the
  // alarm), phase PROFILING. REQUIRES: no event of the job is being localized (Localizing).
  falcon::controller::v1::EventRecord* Open(const std::string& job, const SeriesOnset& onset,
                                            core::UnitOfWork* uow);
  // Opens an event for an operator's ForceValidation (CONFIRMED, forced, no onset series).
  falcon::controller::v1::EventRecord* OpenForced(const std::string& job, int64_t job_iteration,
                                                  core::UnitOfWork* uow);
  // Adds another series' onset to the active event (an earlier onset moves the event's onset).
  // The first onset of a forced event sets its onset, healthy and slow times and slowdown.
  void Attach(falcon::controller::v1::EventRecord* event, const SeriesOnset& onset,
              core::UnitOfWork* uow);
  // Records that `series` recovered (`recovery` is its kRecovery detection). Returns true when
  // this was the last series of the event still slow (the caller then calls Recover).
  bool SeriesRecovered(falcon::controller::v1::EventRecord* event, const std::string& series,
                       const analysis::detect::DetectorEvent& recovery, core::UnitOfWork* uow);
  // -> RECOVERED: recovery_iteration is the first iteration back at the healthy level, the
  // transition's iteration max(job_iteration, recovery_iteration).
  void Recover(falcon::controller::v1::EventRecord* event, int64_t recovery_iteration,
               int64_t job_iteration, const std::string& reason, core::UnitOfWork* uow);
  // -> CLOSED (dismissed, job ended, restarted).
  void Close(falcon::controller::v1::EventRecord* event, int64_t job_iteration,
             const std::string& reason, core::UnitOfWork* uow);
  // -> CLOSED with Event.transient set: the slowdown was not a fail-slow of the job (it cleared
  // before the verdict, or every rank slowed alike; docs/algorithms.md#transients).
  void CloseTransient(falcon::controller::v1::EventRecord* event, int64_t job_iteration,
                      const std::string& reason, core::UnitOfWork* uow);
  // Appends a transition to `state` at `iteration` with `reason`, stores the record and, after the
  // commit, updates watchers and metrics. Leaving the active states frees the job's slot.
  void Transition(falcon::controller::v1::EventRecord* event, falcon::v1::EventState state,
                  int64_t iteration, const std::string& reason, core::UnitOfWork* uow);
  // Stores the record as it is now (fields changed without a transition).
  // Persist, staged to run once at the unit's commit (UnitOfWork::StageOnceBeforeCommit).
  void PersistAtCommit(const falcon::controller::v1::EventRecord& event, core::UnitOfWork* uow);
  void Persist(const falcon::controller::v1::EventRecord& event, core::UnitOfWork* uow);

  // A new sample (seconds) of `series` at `iteration`: for each active event of the job opened by
  // `series` on which it is still slow, it refines Event.slow_iteration_time_ns and slowdown_ratio
  // (running mean since the onset).
  void ObserveSeries(const std::string& job, const std::string& series, int64_t iteration,
                     absl::Duration time);

  // Adds the time lost in one job iteration to each active event of the job (from CONFIRMED on):
  // an event's share is min(iteration_time, the next newer event's baseline) - its own baseline,
  // so the slowdown a later event added is not counted against the earlier ones. Stored every
  // `persist_every` iterations and with every transition.
  void AccountIteration(const std::string& job, int64_t iteration, absl::Duration iteration_time,
                        core::UnitOfWork* uow, int persist_every = 10);

  // The job's newest active event; nullptr when none.
  falcon::controller::v1::EventRecord* Active(const std::string& job);
  const falcon::controller::v1::EventRecord* Active(const std::string& job) const;
  // Every active event of the job, oldest first.
  std::vector<falcon::controller::v1::EventRecord*> ActiveEvents(const std::string& job);
  std::vector<const falcon::controller::v1::EventRecord*> ActiveEvents(
      const std::string& job) const;
  // The job's active event still waiting for its verdict (SUSPECTED or CONFIRMED); nullptr none.
  falcon::controller::v1::EventRecord* Localizing(const std::string& job);
  // Whether the event's verdict is still to come (SUSPECTED or CONFIRMED).
  static bool AwaitsVerdict(const falcon::v1::Event& event);
  falcon::controller::v1::EventRecord* Find(uint64_t event_id);
  const falcon::controller::v1::EventRecord* Find(uint64_t event_id) const;
  // Newest first; job "" = all; limit 0 = all.
  std::vector<const falcon::controller::v1::EventRecord*> List(const std::string& job,
                                                               bool active_only,
                                                               uint32_t limit) const;
  // A page of List: up to `max` events with ids below `before_id` (0 = from the newest), newest
  // first; job "" = all.
  std::vector<const falcon::controller::v1::EventRecord*> ListBefore(const std::string& job,
                                                                     bool active_only,
                                                                     uint64_t before_id,
                                                                     size_t max) const;
  // Events not recovered or closed.
  std::vector<falcon::controller::v1::EventRecord*> OpenEvents();
  // Events held (every state).
  size_t size() const { return events_.size(); }

  // Retention. When an event ended: the time of its last transition or action (recovered or
  // closed events only; absl::InfiniteFuture() for an active one).
  static absl::Time EndTime(const falcon::v1::Event& event);
  // Ids of ended events whose EndTime is at or before `cutoff` (oldest id first), at most `max`,
  // skipping the jobs in `skip_jobs`.
  std::vector<uint64_t> Expired(absl::Time cutoff, size_t max,
                                const absl::flat_hash_set<std::string>& skip_jobs) const;
  // Ids of every event of the jobs in `jobs`.
  std::vector<uint64_t> EventsOfJobs(const absl::flat_hash_set<std::string>& jobs) const;
  // Forgets events (their deletes are staged by the caller) and what is kept per job for `jobs`;
  // the events gauge drops them.
  void Forget(const std::vector<uint64_t>& event_ids, const absl::flat_hash_set<std::string>& jobs);

  // Calls `watcher` with the event after every committed transition of an event of `job`
  // ("" = all). Returns an id for Unwatch.
  uint64_t Watch(const std::string& job, Watcher watcher);
  void Unwatch(uint64_t watch_id);

  static bool IsActiveState(falcon::v1::EventState state);

 private:
  // After the commit: moves the event in the metrics from the (state, cause) it is counted under
  // to its new one, and notifies the watchers.
  // Onset, healthy and slow times, slowdown and running slow mean from the first onset.
  void SetSlowdown(falcon::controller::v1::EventRecord* r, const SeriesOnset& onset);
  void AfterTransition(const falcon::v1::Event& event, core::UnitOfWork* uow);

  const common::Clock* const clock_;
  core::IdAllocator* const ids_;
  metrics::ControllerMetrics* const metrics_;
  std::map<uint64_t, falcon::controller::v1::EventRecord> events_;
  // Drops `event_id` from the job's active events.
  void Deactivate(const std::string& job, uint64_t event_id);

  absl::flat_hash_map<std::string, std::vector<uint64_t>> active_;  // job -> ids, ascending
  absl::flat_hash_map<std::string, int> since_persist_;
  // The (state, cause) each event is counted under in falcon_controller_events (committed
  // transitions only). A verdict sets the cause before its transition, so the event's fields
  // cannot tell which series to decrement.
  absl::flat_hash_map<uint64_t, std::pair<falcon::v1::EventState, falcon::v1::Cause>> counted_;
  struct WatchEntry {
    std::string job;
    Watcher watcher;
  };
  std::map<uint64_t, WatchEntry> watchers_;
  uint64_t next_watch_ = 1;
};

}  // namespace falcon::controller::detection

#endif  // FALCON_CONTROLLER_DETECTION_EVENT_MANAGER_H_
