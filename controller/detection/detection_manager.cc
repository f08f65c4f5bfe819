#include "controller/detection/detection_manager.h"

#include <glog/logging.h>

#include <algorithm>
#include <cstdlib>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/op_kind.h"
#include "common/stats.h"
#include "controller/metrics/metric_table.h"

namespace falcon::controller::detection {

using falcon::controller::v1::EventRecord;

absl::Status DetectionOptions::Validate() const {
  if (resume_window_iterations < 32 || resume_window_iterations > 1'000'000) {
    return absl::InvalidArgumentError("resume_window_iterations: must be in [32, 1000000]");
  }
  if (history_stride < 1 || history_stride > 1'000'000) {
    return absl::InvalidArgumentError("history_stride: must be in [1, 1000000]");
  }
  if (max_pending_job_iterations < 1) {
    return absl::InvalidArgumentError("max_pending_job_iterations: must be >= 1");
  }
  return detector.Validate();
}

void DetectionManager::RecentTimes::Add(int64_t it, int64_t ns) {
  iteration[next] = it;
  arrival_ns[next] = ns;
  next = (next + 1) % kSize;
  count = std::min(count + 1, kSize);
}

int64_t DetectionManager::RecentTimes::ArrivalOf(int64_t it) const {
  int64_t oldest_ns = 0;
  int64_t oldest_it = INT64_MAX;
  for (int i = 0; i < count; ++i) {
    if (iteration[i] == it) return arrival_ns[i];
    if (iteration[i] < oldest_it) {
      oldest_it = iteration[i];
      oldest_ns = arrival_ns[i];
    }
  }
  return oldest_ns;
}

DetectionManager::DetectionManager(DetectionOptions options, const common::Clock* clock,
                                   const registry::JobRegistry* registry,
                                   const settings::SettingsManager* settings, EventManager* events,
                                   Localizer* localizer, const store::ControllerStore* store,
                                   metrics::ControllerMetrics* metrics)
    : options_(std::move(options)),
      environment_(options_.detector.lag),
      clock_(clock),
      registry_(registry),
      settings_(settings),
      events_(events),
      localizer_(localizer),
      store_(store),
      metrics_(metrics) {}

std::unique_ptr<analysis::detect::OnlineDetector> DetectionManager::NewDetector(
    const std::string& job) const {
  analysis::detect::OnlineDetectorOptions o = options_.detector;
  settings::EffectiveSettings s = settings_->Effective(job);
  o.thresholds.verification_ratio = s.verification_min_ratio;
  o.thresholds.min_gap = static_cast<int>(s.min_gap_iterations);
  o.thresholds.hazard = s.hazard;
  o.thresholds.change_probability = s.change_probability;
  absl::StatusOr<analysis::detect::OnlineDetector> d = analysis::detect::OnlineDetector::Create(o);
  if (!d.ok())
    d = analysis::detect::OnlineDetector::Create(options_.detector);  // Validated at startup.
  return std::make_unique<analysis::detect::OnlineDetector>(std::move(*d));
}

DetectionManager::Pipeline& DetectionManager::PipelineOf(const registry::JobEntry& job) {
  auto& slot = pipelines_[job.name()];
  if (slot == nullptr) {
    slot = std::make_unique<Pipeline>();
    slot->job = job.name();
    slot->assembler = JobSeriesAssembler(static_cast<uint32_t>(job.ranks().size()),
                                         options_.max_pending_job_iterations);
    slot->job_series.detector = NewDetector(job.name());
  }
  return *slot;
}

DetectionManager::Series& DetectionManager::RankSeriesOf(Pipeline& p, uint32_t rank) {
  Series& s = p.ranks[rank];
  if (s.detector == nullptr) s.detector = NewDetector(p.job);
  return s;
}

void DetectionManager::OnJobChanged(const registry::JobEntry& job) {
  PipelineOf(job).assembler.set_expected_ranks(static_cast<uint32_t>(job.ranks().size()));
}

void DetectionManager::OnSettingsChanged(const std::string& job) {
  for (auto& [name, p] : pipelines_) {
    if (!job.empty() && name != job) continue;
    settings::EffectiveSettings s = settings_->Effective(name);
    analysis::detect::DetectorThresholds t;
    t.verification_ratio = s.verification_min_ratio;
    t.min_gap = static_cast<int>(s.min_gap_iterations);
    t.hazard = s.hazard;
    t.change_probability = s.change_probability;
    // The settings manager validates the same ranges, so an error here means the two disagree:
    // the detectors keep their previous thresholds.
    absl::Status status = p->job_series.detector->SetThresholds(t);
    for (auto& [rank, series] : p->ranks) status.Update(series.detector->SetThresholds(t));
    if (!status.ok()) {
      LOG(WARNING) << "detector thresholds not applied job=" << name << " error=\""
                   << status.message() << "\"";
      if (metrics_ != nullptr) metrics_->CountError(metrics::where::kDetectionSetThresholds);
      continue;
    }
    VLOG(1) << "detector thresholds applied job=" << name
            << " verification_ratio=" << t.verification_ratio << " min_gap=" << t.min_gap
            << " hazard=" << t.hazard << " change_probability=" << t.change_probability;
  }
}

DetectionManager::ApplyStats DetectionManager::ApplySummaries(
    const registry::JobEntry& job,
    const google::protobuf::RepeatedPtrField<falcon::v1::IterationSummary>& summaries,
    core::UnitOfWork* uow) {
  ApplyStats stats;
  Pipeline& p = PipelineOf(job);
  const int64_t now_ns = absl::ToUnixNanos(clock_->Now());
  // The applied summaries' iteration times, stored as one row per iteration (usually one).
  std::vector<std::pair<int64_t, store::RankSample>> stored;
  stored.reserve(static_cast<size_t>(summaries.size()));
  for (const falcon::v1::IterationSummary& s : summaries) {
    Series& series = RankSeriesOf(p, s.rank());
    if (s.iteration() <= series.last_iteration) {
      ++stats.stale;
      if (!series.stale_streak) {
        series.stale_streak = true;
        LOG(INFO) << "stale summaries job=" << job.name() << " rank=" << s.rank()
                  << " iteration=" << s.iteration() << " last_iteration=" << series.last_iteration
                  << " why=\"iteration not above the rank's last one: skipped until it is (an "
                     "agent resending what it sent; or a new run under a job name in use, "
                     "which starts over below it: give each run its own job name)\"";
      }
      continue;
    }
    series.stale_streak = false;
    // Looked up per summary: a summary of this batch may end the event (freeing its profiler)
    // or open one (found by the fuzzer: a pointer kept across the loop was used after free).
    if (CommProfiler* profiler = localizer_->Profiler(job.name())) profiler->AddSummary(s, job);
    environment_.AddCompute(job.name(), s.rank(), s.iteration(), s.compute_ns());
    for (const falcon::v1::CommIterationSummary& c : s.comms()) {
      environment_.AddTransfer(job.name(), c.comm_id(), s.iteration(), c.transfer_ns());
    }
    stored.push_back({s.iteration(), {s.rank(), s.iteration_time_ns()}});
    Feed(p, job, s.rank(), s.iteration(), s.iteration_time_ns(), s.plan_version(), now_ns,
         /*replay=*/false, uow);
    if (on_rank_summary_) {
      for (EventRecord* active : events_->ActiveEvents(p.job)) {
        // An earlier callback may have ended it.
        if (EventManager::IsActiveState(active->event().state())) on_rank_summary_(active, s, uow);
      }
    }
    ++stats.applied;
  }
  StoreSamples(p, &stored, uow);
  return stats;
}

void DetectionManager::StoreSamples(Pipeline& p,
                                    std::vector<std::pair<int64_t, store::RankSample>>* stored,
                                    core::UnitOfWork* uow) {
  if (stored->empty()) return;
  std::stable_sort(stored->begin(), stored->end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<store::RankSample> row;
  for (size_t i = 0; i < stored->size();) {
    const int64_t iteration = (*stored)[i].first;
    row.clear();
    for (; i < stored->size() && (*stored)[i].first == iteration; ++i) {
      row.push_back((*stored)[i].second);
    }
    uow->txn().PutSampleRow(p.job, iteration, row);
  }
  // The job's window: the `resume_window_iterations` below its newest complete iteration (not
  // the batch's newest: one rank's absurd iteration number must not trim every other rank's
  // samples), trimmed in one range once a quarter more has accumulated.
  // (A lagging rank's rows below first_stored go with the next trim.)
  if (p.first_stored < 0) p.first_stored = stored->front().first;
  const int64_t window = options_.resume_window_iterations;
  if (p.last_iteration - p.first_stored > window + window / 4) {
    p.first_stored = p.last_iteration - window;
    uow->txn().TrimSamples(p.job, p.first_stored);
  }
}

void DetectionManager::Feed(Pipeline& p, const registry::JobEntry& job, uint32_t rank,
                            int64_t iteration, int64_t time_ns, int64_t plan_version,
                            int64_t arrival_ns, bool replay, core::UnitOfWork* uow) {
  Series& s = RankSeriesOf(p, rank);
  s.last_iteration = iteration;
  p.newest_reported = std::max(p.newest_reported, iteration);
  s.recent.Add(iteration, arrival_ns);
  absl::StatusOr<std::optional<analysis::detect::DetectorEvent>> ev =
      s.detector->Add(iteration, absl::Nanoseconds(time_ns));
  NoteArmed(p, RankSeries(rank), s, iteration, replay);
  OnObservation(p, RankSeries(rank), s, iteration, ev, replay, uow);
  if (!replay) {
    events_->ObserveSeries(p.job, RankSeries(rank), iteration, absl::Nanoseconds(time_ns));
  }
  std::vector<JobPoint> done;
  p.assembler.Add(iteration, time_ns, plan_version, &done);
  for (const JobPoint& point : done) CompleteJobIteration(p, point, arrival_ns, replay, uow);
  (void)job;
}

void DetectionManager::CompleteJobIteration(Pipeline& p, const JobPoint& point, int64_t arrival_ns,
                                            bool replay, core::UnitOfWork* uow) {
  Series& s = p.job_series;
  s.last_iteration = point.iteration;
  s.recent.Add(point.iteration, arrival_ns);
  p.last_iteration = point.iteration;
  p.last_time_ns = point.iteration_time_ns;
  absl::StatusOr<std::optional<analysis::detect::DetectorEvent>> ev =
      s.detector->Add(point.iteration, absl::Nanoseconds(point.iteration_time_ns));
  NoteArmed(p, kJobSeries, s, point.iteration, replay);
  constexpr size_t kBaseline = 32;
  if (p.recent_ring.size() < kBaseline) {
    p.recent_ring.push_back(point.iteration_time_ns);
  } else {
    p.recent_ring[p.recent_next] = point.iteration_time_ns;
    p.recent_next = (p.recent_next + 1) % kBaseline;
  }
  if (events_->Active(p.job) == nullptr && !s.detector->in_slowdown()) {
    if (p.baseline_ring.size() < kBaseline) {
      p.baseline_ring.push_back(point.iteration_time_ns);
    } else {
      p.baseline_ring[p.baseline_next] = point.iteration_time_ns;
      p.baseline_next = (p.baseline_next + 1) % kBaseline;
    }
  }
  if (replay) {
    OnObservation(p, kJobSeries, s, point.iteration, ev, /*replay=*/true, uow);
    return;
  }

  const int64_t bucket = point.iteration / options_.history_stride * options_.history_stride;
  if (bucket != p.bucket_start) {
    p.bucket_start = bucket;
    p.bucket_sum_ns = 0;
    p.bucket_count = 0;
  }
  p.bucket_sum_ns += point.iteration_time_ns;
  ++p.bucket_count;
  p.bucket_plan = point.plan_version;
  falcon::v1::HistoryPoint h;
  h.set_iteration(bucket);
  h.set_time_ns(arrival_ns);
  h.set_iteration_time_ns(p.bucket_sum_ns / p.bucket_count);
  h.set_plan_version(p.bucket_plan);
  uow->txn().PutHistory(p.job, h);
  if (metrics_ != nullptr) {
    metrics_->JobIterationTime(p.job, absl::Nanoseconds(point.iteration_time_ns));
  }

  JudgePendingOnsets(p, uow);  // The ranks' series decided first, as their summaries came.
  OnObservation(p, kJobSeries, s, point.iteration, ev, replay, uow);
  CheckLeftAfterEnvironment(p, point.iteration, point.iteration_time_ns, uow);
  events_->ObserveSeries(p.job, kJobSeries, point.iteration,
                         absl::Nanoseconds(point.iteration_time_ns));
  const absl::Duration t = absl::Nanoseconds(point.iteration_time_ns);
  events_->AccountIteration(p.job, point.iteration, t, uow);
  localizer_->OnJobIteration(p.job, point.iteration, point.iteration_time_ns, uow);
  if (on_job_iteration_) {
    for (EventRecord* active : events_->ActiveEvents(p.job)) {
      // An earlier callback may have ended it.
      if (EventManager::IsActiveState(active->event().state())) {
        on_job_iteration_(active, point.iteration, t, uow);
      }
    }
  }
}

EventRecord* DetectionManager::EventToJoin(const std::string& job, const std::string& series,
                                           const analysis::detect::DetectorEvent& ev) {
  // The event being localized: the same time window, plausibly the same cause.
  if (EventRecord* localizing = events_->Localizing(job)) return localizing;
  std::vector<EventRecord*> active = events_->ActiveEvents(job);
  for (auto it = active.rbegin(); it != active.rend(); ++it) {
    const falcon::v1::Event& e = (*it)->event();
    // The change began before the event's verdict (a series that confirmed it late), or where
    // its latest plan took effect (the plan's doing, e.g. a revert), or the series slows down
    // again after a partial recovery.
    if (e.verdict_iteration() >= 0 && ev.iteration <= e.verdict_iteration()) return *it;
    if (PlanCausedChange(e, ev)) return *it;
    const auto& recovered = (*it)->recovered_series();
    if (std::find(recovered.begin(), recovered.end(), series) != recovered.end()) return *it;
  }
  return nullptr;
}

EventRecord* DetectionManager::EventSlowOn(const std::string& job, const std::string& series) {
  std::vector<EventRecord*> active = events_->ActiveEvents(job);
  for (auto it = active.rbegin(); it != active.rend(); ++it) {
    const auto& onset = (*it)->onset_series();
    const auto& recovered = (*it)->recovered_series();
    if (std::find(onset.begin(), onset.end(), series) != onset.end() &&
        std::find(recovered.begin(), recovered.end(), series) == recovered.end()) {
      return *it;
    }
  }
  return nullptr;
}

absl::Duration DetectionManager::RecentLevel(const Pipeline& p) {
  if (p.recent_ring.empty()) return absl::ZeroDuration();
  return absl::Nanoseconds(common::Median(p.recent_ring));
}

DetectionManager::Judged DetectionManager::JudgeEnvironment(
    Pipeline& p, const std::string& series, const analysis::detect::DetectorEvent& ev) {
  const registry::JobEntry* job = registry_->Find(p.job);
  if (job == nullptr) return Judged::kPart;
  const double threshold = settings_->Effective(p.job).verification_min_ratio;
  absl::StatusOr<analysis::detect::EnvironmentJudgement> j =
      environment_.JudgeSlowdown(*job, ev, threshold, /*remember=*/series == kJobSeries);
  if (!j.ok()) {
    LOG(WARNING) << "environment judgement failed job=" << p.job << " series=" << series
                 << " error=\"" << j.status().message() << "\"";
    if (metrics_ != nullptr) metrics_->CountError(metrics::where::kDetectionEnvironment);
    return Judged::kPart;
  }
  if (!j->environment) {
    // A rank's series decides on its own summary: the other ranks' of that iteration may not be
    // in yet. When every rank's compute rose somewhat (a quarter of the threshold) and none
    // stands out, judged again on the whole iteration.
    const bool complete = ev.decided_at <= p.last_iteration;
    if (!complete && !(j->standout_excess > 1 + 5 * threshold) && j->factor >= 1 + threshold / 4) {
      return Judged::kIncomplete;
    }
    LOG(INFO) << "slowdown not the environment's job=" << p.job << " series=" << series
              << " iteration=" << ev.iteration << " why=\"" << j->reason << "\"";
    return Judged::kPart;
  }
  // Every series of the job sees the same shift: logged and counted once.
  if (p.last_environment_iteration < 0 ||
      ev.iteration > p.last_environment_iteration + options_.detector.lag) {
    LOG(INFO) << "environment shift job=" << p.job << " series=" << series
              << " iteration=" << ev.iteration << " decided=" << ev.decided_at
              << " ratio=" << absl::StrFormat("%.3f", ev.ratio)
              << " compute=" << absl::StrFormat("%.3f", j->factor) << " why=\"" << j->reason
              << "\"";
    if (metrics_ != nullptr) metrics_->EnvironmentShift(p.job);
  }
  p.last_environment_iteration = std::max(p.last_environment_iteration, ev.iteration);
  return Judged::kEnvironment;
}

void DetectionManager::JudgePendingOnsets(Pipeline& p, core::UnitOfWork* uow) {
  if (p.pending_onsets.empty()) return;
  std::vector<PendingOnset> ready;
  std::vector<PendingOnset> waiting;
  for (PendingOnset& o : p.pending_onsets) {
    (o.detection.decided_at <= p.last_iteration ? ready : waiting).push_back(std::move(o));
  }
  p.pending_onsets = std::move(waiting);
  for (const PendingOnset& o : ready) {
    const int64_t rank = SeriesRank(o.series);
    const Series& s = rank < 0 ? p.job_series : RankSeriesOf(p, static_cast<uint32_t>(rank));
    Onset(p, o.series, s, o.detection, /*judge_environment=*/true, uow);
  }
}

void DetectionManager::CheckLeftAfterEnvironment(Pipeline& p, int64_t iteration, int64_t time_ns,
                                                 core::UnitOfWork* uow) {
  if (!environment_.HasShift(p.job)) return;
  const Series& s = p.job_series;
  if (!s.detector->in_slowdown()) {  // Healthy again: the shift is over.
    environment_.ForgetShift(p.job);
    return;
  }
  std::optional<analysis::detect::DetectorEvent> left = environment_.ObserveLeft(
      p.job, iteration, static_cast<double>(time_ns) * 1e-9, s.detector->healthy_level(),
      settings_->Effective(p.job).verification_min_ratio);
  if (!left.has_value()) return;
  left->probability = s.detector->change_probability();
  LOG(INFO) << "slowdown left after an environment shift job=" << p.job
            << " iteration=" << left->iteration << " decided=" << left->decided_at
            << " ratio=" << absl::StrFormat("%.3f", left->ratio);
  Onset(p, kJobSeries, s, *left, /*judge_environment=*/false, uow,
        /*after_environment_shift=*/true);
}

void DetectionManager::Onset(Pipeline& p, const std::string& series, const Series& s,
                             const analysis::detect::DetectorEvent& ev, bool judge_environment,
                             core::UnitOfWork* uow, bool after_environment_shift) {
  if (!settings_->Effective(p.job).detection_enabled) return;
  SeriesOnset onset;
  onset.series = series;
  onset.after_environment_shift = after_environment_shift;
  onset.detection = ev;
  onset.onset_time = absl::FromUnixNanos(s.recent.ArrivalOf(ev.iteration));
  onset.job_iteration = p.last_iteration;
  onset.job_baseline = Baseline(p.job);
  if (EventRecord* joined = EventToJoin(p.job, series, ev)) {
    events_->Attach(joined, onset, uow);
    return;
  }
  // Load from outside the job that slows every rank alike is no fail-slow of a part of it
  // (docs/algorithms.md#environment-shifts).
  if (judge_environment) {
    // While onsets of the job wait for their iteration to complete, a further one decided on an
    // incomplete iteration waits with them, unjudged: at fleet scale thousands of rank series
    // decide on one shift while its iteration is still being reported, and each judgement on
    // the partial data measured the whole job again (a 16,384-rank controller stalled for
    // minutes, docs/fleet.md). They are judged together, on the whole iteration.
    if (ev.decided_at > p.last_iteration && !p.pending_onsets.empty()) {
      p.pending_onsets.push_back({series, ev});
      return;
    }
    // A rank series deciding on the environment shift just judged is that shift (as it is
    // logged and counted once): not measured again for each of thousands of series.
    if (series != kJobSeries && p.last_environment_iteration >= 0 &&
        std::abs(ev.iteration - p.last_environment_iteration) <= options_.detector.lag) {
      return;
    }
    switch (JudgeEnvironment(p, series, ev)) {
      case Judged::kEnvironment:
        return;
      case Judged::kIncomplete:
        p.pending_onsets.push_back({series, ev});
        return;
      case Judged::kPart:
        break;
    }
  }
  environment_.ForgetShift(p.job);
  // A new event beside the active ones: its lost time counts from the level they left.
  const bool concurrent = events_->Active(p.job) != nullptr;
  if (concurrent) onset.job_baseline = RecentLevel(p);
  EventRecord* e = events_->Open(p.job, onset, uow);
  if (concurrent) {
    const std::string line =
        absl::StrCat("concurrent event job=", p.job, " event=", e->event().event_id(),
                     " series=", series, " active=", events_->ActiveEvents(p.job).size());
    uow->AfterCommit([line]() { LOG(INFO) << line; });
  }
  localizer_->Start(e, uow);
}

void DetectionManager::OnObservation(
    Pipeline& p, const std::string& series, const Series& s, int64_t iteration,
    const absl::StatusOr<std::optional<analysis::detect::DetectorEvent>>& ev, bool replay,
    core::UnitOfWork* uow) {
  if (!ev.ok()) {
    LOG(WARNING) << "observation refused by the detector job=" << p.job << " series=" << series
                 << " iteration=" << iteration << " error=\"" << ev.status().message() << "\"";
    if (metrics_ != nullptr) metrics_->CountError(metrics::where::kDetectionObservation);
    return;
  }
  if (!replay && ev->has_value()) OnDetection(p, series, s, **ev, uow);
}

void DetectionManager::OnDetection(Pipeline& p, const std::string& series, const Series& s,
                                   const analysis::detect::DetectorEvent& ev,
                                   core::UnitOfWork* uow) {
  if (ev.kind == analysis::detect::ChangeKind::kSlowdown) {
    Onset(p, series, s, ev, /*judge_environment=*/true, uow);
    return;
  }
  // The recovery is the newest event's on which the series is still slow.
  EventRecord* active = EventSlowOn(p.job, series);
  if (active == nullptr) return;
  // A recovery counts once the level is back within the threshold of the healthy one (a
  // partial recovery keeps the series slowed down). A speed-up on a series the event still
  // counts as slow means the detector learned the slow level as healthy (its onset lies before
  // the replay window after a restart): the series is back to a faster level, so it recovered.
  const bool recovered =
      (ev.kind == analysis::detect::ChangeKind::kRecovery && !s.detector->in_slowdown()) ||
      ev.kind == analysis::detect::ChangeKind::kSpeedup;
  if (!recovered) return;
  if (PlanCausedChange(active->event(), ev) &&
      !(ev.kind == analysis::detect::ChangeKind::kRecovery && RevertedToNoPlan(active->event()))) {
    return;
  }
  if (still_slow_) {
    if (std::optional<std::string> why = still_slow_(active, uow)) {
      LOG(INFO) << "recovery refused job=" << p.job << " event=" << active->event().event_id()
                << " series=" << series << " iteration=" << ev.iteration << " ratio=" << ev.ratio
                << " why=\"" << *why << "\"";
      return;
    }
  }
  if (events_->SeriesRecovered(active, series, ev, uow)) {
    localizer_->Cancel(active, uow);
    if (EventManager::AwaitsVerdict(active->event())) {
      // Gone before its verdict: no fail-slow to localize or mitigate
      // (docs/algorithms.md#transients).
      events_->CloseTransient(
          active, std::max(p.last_iteration, ev.decided_at),
          absl::StrFormat("transient: %s back to %.4f s (x%.2f) at iteration %d before the "
                          "verdict, verified at %d",
                          series, ev.mean_after, ev.ratio, ev.iteration, ev.decided_at),
          uow);
      return;
    }
    // The transition where the detector verified the recovery, as the reason says.
    events_->Recover(active, ev.iteration, std::max(p.last_iteration, ev.decided_at),
                     absl::StrFormat("%s back to %.4f s (x%.2f) at iteration %d, verified at %d",
                                     series, ev.mean_after, ev.ratio, ev.iteration, ev.decided_at),
                     uow);
    if (on_recovered_) on_recovered_(active, uow);
  }
}

absl::Status DetectionManager::Replay(const registry::JobEntry& job) {
  // Samples come rank by rank; the job series needs them iteration by iteration.
  std::map<int64_t, std::vector<std::pair<uint32_t, int64_t>>> by_iteration;
  uint64_t unregistered = 0;
  uint32_t example = 0;
  absl::Status s = store_->ScanSamples(job.name(), [&](uint32_t rank, int64_t it, int64_t ns) {
    if (job.AgentOfRank(rank) == nullptr) {
      if (unregistered++ == 0) example = rank;
      return;
    }
    by_iteration[it].emplace_back(rank, ns);
  });
  if (!s.ok()) return s;
  if (unregistered > 0) {
    LOG(WARNING) << "stored samples skipped job=" << job.name() << " samples=" << unregistered
                 << " rank=" << example << " error=\"ranks the job has not registered\"";
  }
  Pipeline& p = PipelineOf(job);
  for (const auto& [it, samples] : by_iteration) {
    for (const auto& [rank, ns] : samples) {
      Series& series = RankSeriesOf(p, rank);
      if (it <= series.last_iteration) continue;
      if (p.first_stored < 0 || it < p.first_stored) p.first_stored = it;
      Feed(p, job, rank, it, ns, 0, 0, /*replay=*/true, nullptr);
    }
  }
  return absl::OkStatus();
}

absl::Status DetectionManager::Restore(core::UnitOfWork* uow) {
  for (const std::string& name : registry_->JobNames()) {
    const registry::JobEntry* job = registry_->Find(name);
    absl::Status s = Replay(*job);
    if (!s.ok()) return s;
  }
  for (EventRecord* event : events_->OpenEvents()) {
    const registry::JobEntry* job = registry_->Find(event->event().job());
    if (job == nullptr) {
      events_->Close(event, -1, "job unknown after a controller restart", uow);
      continue;
    }
    localizer_->Resume(event, uow);
  }
  return absl::OkStatus();
}

bool DetectionManager::ApplyOps(
    registry::JobEntry* job, uint32_t rank,
    const google::protobuf::RepeatedPtrField<falcon::v1::OpRecord>& ops) {
  if (CommProfiler* profiler = localizer_->Profiler(job->name())) profiler->AddOps(rank, ops, *job);
  // Traffic kinds matter only for communicators without a role hint.
  if (!job->HasUnhintedComms()) return false;
  std::map<uint64_t, std::pair<uint64_t, uint64_t>> counts;
  for (const falcon::v1::OpRecord& op : ops) {
    if (common::IsPeerTransfer(op.op_kind())) continue;  // Part of an op, not traffic of its own.
    auto& c = counts[op.comm_id()];
    if (op.op_kind() == falcon::v1::OP_KIND_SEND || op.op_kind() == falcon::v1::OP_KIND_RECV) {
      ++c.first;
    } else {
      ++c.second;
    }
  }
  bool changed = false;
  for (const auto& [id, c] : counts)
    changed = job->ObserveTraffic(id, c.first, c.second) || changed;
  return changed;
}

void DetectionManager::RemoveJob(const std::string& job) {
  pipelines_.erase(job);
  environment_.RemoveJob(job);
  // A hash map keeps its capacity: give it back once mostly empty (after a large purge).
  if (pipelines_.size() * 4 < pipelines_.capacity() && pipelines_.capacity() > 1024) {
    pipelines_.rehash(0);
  }
  if (metrics_ != nullptr) metrics_->RemoveJob(job);
}

void DetectionManager::NoteArmed(Pipeline& p, const std::string& series, Series& s,
                                 int64_t iteration, bool replay) {
  if (s.armed_iteration >= 0 || !s.detector->warmed_up()) return;
  s.armed_iteration = iteration;
  if (&s != &p.job_series) ++p.armed_ranks;
  if (replay) return;  // Logged when it happened.
  if (&s == &p.job_series) {
    LOG(INFO) << "detection armed job=" << p.job << " series=" << series
              << " iteration=" << iteration << " observations=" << s.detector->observations();
  } else if (!p.every_rank_armed_logged && p.armed_ranks >= p.assembler.expected_ranks()) {
    p.every_rank_armed_logged = true;  // Every rank the job registered, not only those seen.
    LOG(INFO) << "detection armed on every rank job=" << p.job << " ranks=" << p.armed_ranks
              << " iteration=" << iteration;
  }
}

int64_t DetectionManager::ArmedIteration(const std::string& job) const {
  auto it = pipelines_.find(job);
  return it == pipelines_.end() ? -1 : it->second->job_series.armed_iteration;
}

uint32_t DetectionManager::ArmedRanks(const std::string& job) const {
  auto it = pipelines_.find(job);
  return it == pipelines_.end() ? 0 : it->second->armed_ranks;
}

int64_t DetectionManager::LastIteration(const std::string& job) const {
  auto it = pipelines_.find(job);
  return it == pipelines_.end() ? -1 : it->second->last_iteration;
}

int64_t DetectionManager::NewestReported(const std::string& job) const {
  auto it = pipelines_.find(job);
  if (it == pipelines_.end()) return -1;
  const Pipeline& p = *it->second;
  // A rank cannot be further ahead of the job's complete iterations than the assembler keeps
  // pending (an absurd iteration number of one rank must not stall profiling).
  if (p.last_iteration < 0) return p.newest_reported;
  return std::min(p.newest_reported,
                  p.last_iteration + static_cast<int64_t>(options_.max_pending_job_iterations));
}

int64_t DetectionManager::LastIterationTimeNs(const std::string& job) const {
  auto it = pipelines_.find(job);
  return it == pipelines_.end() ? 0 : it->second->last_time_ns;
}

bool DetectionManager::PlanCausedChange(const falcon::v1::Event& event,
                                        const analysis::detect::DetectorEvent& ev) {
  if (event.state() != falcon::v1::EVENT_STATE_MITIGATING) return false;
  // Any plan sent for the event (S2/S2L/S3 apply, or their revert), not only the latest: S2 and
  // S2L are often sent a few iterations apart, and the change S2 made is S2's even once S2L is the
  // latest (the demo: S2 in force at 72, S2L at 80, the iteration time back at 72 read as the
  // fault clearing, and both plans reverted).
  for (const falcon::v1::Action& a : event.actions()) {
    if (a.dry_run() || a.directive_id() == 0) continue;
    if (ev.iteration >= a.iteration() - kPlanSpeedupSlack &&
        ev.iteration <= a.iteration() + kPlanSpeedupWindow) {
      return true;
    }
  }
  return false;
}

bool DetectionManager::RevertedToNoPlan(const falcon::v1::Event& event) {
  // Newest first: the latest sent action, then each plan level's latest (in force when it applied).
  bool latest_seen = false, s2_seen = false, s2l_seen = false, s3_seen = false;
  for (int i = event.actions_size() - 1; i >= 0; --i) {
    const falcon::v1::Action& a = event.actions(i);
    if (a.dry_run() || a.directive_id() == 0) continue;
    if (!latest_seen && !a.revert()) return false;
    latest_seen = true;
    bool* seen = nullptr;
    switch (a.strategy()) {
      case falcon::v1::STRATEGY_S2_MICRO_BATCH:
        seen = &s2_seen;
        break;
      case falcon::v1::STRATEGY_S2L_LAYER_SPLIT:
        seen = &s2l_seen;
        break;
      case falcon::v1::STRATEGY_S3_TOPOLOGY:
        seen = &s3_seen;
        break;
      default:
        break;  // S4 is no plan that stays in force.
    }
    if (seen == nullptr || *seen) continue;
    *seen = true;
    if (!a.revert()) return false;  // That level's plan is still in force.
  }
  return latest_seen;
}

int64_t DetectionManager::MaxRankIteration(const std::string& job) const {
  auto it = pipelines_.find(job);
  if (it == pipelines_.end()) return -1;
  int64_t m = it->second->last_iteration;
  for (const auto& [rank, s] : it->second->ranks) m = std::max(m, s.last_iteration);
  return m;
}

absl::Duration DetectionManager::Baseline(const std::string& job) const {
  auto it = pipelines_.find(job);
  if (it == pipelines_.end() || it->second->baseline_ring.empty()) return absl::ZeroDuration();
  return absl::Nanoseconds(common::Median(it->second->baseline_ring));
}

size_t DetectionManager::MemoryBytes() const {
  size_t bytes = environment_.MemoryBytes();
  for (const auto& [name, p] : pipelines_) {
    bytes += sizeof(Pipeline) + p->baseline_ring.capacity() * sizeof(int64_t);
    bytes += p->job_series.detector->MemoryBytes();
    bytes += p->assembler.pending() * (sizeof(JobPoint) + 48);
    for (const auto& [rank, s] : p->ranks) {
      bytes += sizeof(s) + sizeof(uint32_t) + s.detector->MemoryBytes();
    }
  }
  return bytes;
}

size_t DetectionManager::series_count() const {
  size_t n = 0;
  for (const auto& [name, p] : pipelines_) n += 1 + p->ranks.size();
  return n;
}

}  // namespace falcon::controller::detection
