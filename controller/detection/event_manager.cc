#include "controller/detection/event_manager.h"

#include <glog/logging.h>

#include <algorithm>
#include <cmath>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace falcon::controller::detection {

using falcon::controller::v1::EventRecord;
using falcon::v1::Event;

namespace {

// " rank=1,2" for culprit ranks, " link=0->1,2->3" for culprit links, " node=node-2 links=18" for
// culprit nodes (their NICs; the links are the evidence, counted); nothing before a verdict names
// them (the series that slowed first is often not the culprit's: in synchronous training every
// rank slows down).
std::string CulpritFields(const EventRecord& r) {
  const Event& e = r.event();
  std::string out;
  if (e.ranks_size() > 0) absl::StrAppend(&out, " rank=", absl::StrJoin(e.ranks(), ","));
  if (e.nodes_size() > 0) {
    absl::StrAppend(&out, " node=", absl::StrJoin(e.nodes(), ","), " links=", e.links_size());
  } else if (e.links_size() > 0) {
    absl::StrAppend(&out, " link=",
                    absl::StrJoin(e.links(), ",", [](std::string* o, const falcon::v1::Link& l) {
                      absl::StrAppend(o, l.src_rank(), "->", l.dst_rank());
                    }));
  }
  return out;
}

}  // namespace

std::string RankSeries(uint32_t rank) { return absl::StrCat("rank/", rank); }

int64_t SeriesRank(const std::string& series) {
  constexpr absl::string_view kPrefix = "rank/";
  if (series.rfind(kPrefix.data(), 0) != 0) return -1;
  uint32_t r = 0;
  if (!absl::SimpleAtoi(absl::string_view(series).substr(kPrefix.size()), &r)) return -1;
  return r;
}

EventManager::EventManager(const common::Clock* clock, core::IdAllocator* ids,
                           metrics::ControllerMetrics* metrics)
    : clock_(clock), ids_(ids), metrics_(metrics) {}

bool EventManager::IsActiveState(falcon::v1::EventState s) {
  return s == falcon::v1::EVENT_STATE_SUSPECTED || s == falcon::v1::EVENT_STATE_CONFIRMED ||
         s == falcon::v1::EVENT_STATE_LOCALIZED || s == falcon::v1::EVENT_STATE_MITIGATING;
}

void EventManager::Load(const std::vector<EventRecord>& records) {
  events_.clear();
  active_.clear();
  counted_.clear();
  for (const EventRecord& r : records) {
    events_[r.event().event_id()] = r;
    if (IsActiveState(r.event().state())) {
      active_[r.event().job()].push_back(r.event().event_id());
    }
    if (metrics_ != nullptr) {
      counted_[r.event().event_id()] = std::make_pair(r.event().state(), r.event().cause());
      metrics_->EventTransition(falcon::v1::EVENT_STATE_UNSPECIFIED, falcon::v1::CAUSE_UNSPECIFIED,
                                r.event().state(), r.event().cause());
    }
  }
  for (auto& [job, ids] : active_) {
    std::sort(ids.begin(), ids.end());
    if (metrics_ != nullptr) metrics_->ActiveFailSlows(job, static_cast<int>(ids.size()));
  }
}

bool EventManager::AwaitsVerdict(const Event& event) {
  return event.state() == falcon::v1::EVENT_STATE_SUSPECTED ||
         event.state() == falcon::v1::EVENT_STATE_CONFIRMED;
}

void EventManager::Deactivate(const std::string& job, uint64_t event_id) {
  auto it = active_.find(job);
  if (it == active_.end()) return;
  it->second.erase(std::remove(it->second.begin(), it->second.end(), event_id), it->second.end());
  if (it->second.empty()) active_.erase(it);
}

EventRecord* EventManager::Open(const std::string& job, const SeriesOnset& onset,
                                core::UnitOfWork* uow) {
  const uint64_t id = ids_->NextEventId(&uow->txn());
  EventRecord& r = events_[id];
  Event* e = r.mutable_event();
  const analysis::detect::DetectorEvent& d = onset.detection;
  e->set_event_id(id);
  e->set_job(job);
  e->set_cause(falcon::v1::CAUSE_UNSPECIFIED);
  e->set_alarm_iteration(d.decided_at);
  e->set_verdict_iteration(-1);
  e->set_recovery_iteration(-1);
  e->set_alarm_time_ns(absl::ToUnixNanos(clock_->Now()));
  SetSlowdown(&r, onset);
  r.set_after_environment_shift(onset.after_environment_shift);
  r.set_phase(falcon::controller::v1::PHASE_PROFILING);
  active_[job].push_back(id);

  // The suspected state lives inside the detector (BOCD proposed, verification pending); it is
  // recorded at the onset so the event's life shows it.
  falcon::v1::StateTransition* t = e->add_transitions();
  t->set_state(falcon::v1::EVENT_STATE_SUSPECTED);
  t->set_time_ns(e->onset_time_ns());
  t->set_iteration(d.iteration);
  t->set_reason(absl::StrFormat("change point on %s at iteration %d (p=%.2f)", onset.series,
                                d.iteration, d.probability));
  e->set_state(falcon::v1::EVENT_STATE_SUSPECTED);
  {
    const std::string line = absl::StrFormat(
        "event opened job=%s event=%d%s state=suspected series=%s iteration=%d ratio=%.2f", job, id,
        CulpritFields(r), onset.series, d.iteration, d.ratio);
    uow->AfterCommit([line]() { LOG(INFO) << line; });
  }
  AfterTransition(*e, uow);
  // Confirmed where the detector verified the slowdown: the alarm.
  Transition(&r, falcon::v1::EVENT_STATE_CONFIRMED, d.decided_at,
             absl::StrFormat("%s mean %.4f s -> %.4f s (x%.2f) verified at iteration %d",
                             onset.series, d.mean_before, d.mean_after, d.ratio, d.decided_at),
             uow);
  if (metrics_ != nullptr) {
    const absl::Duration delay = clock_->Now() - onset.onset_time;
    const int64_t iterations = d.decided_at - d.iteration;
    uow->AfterCommit([this, delay, iterations]() { metrics_->DetectionDelay(delay, iterations); });
  }
  return &r;
}

void EventManager::SetSlowdown(EventRecord* r, const SeriesOnset& onset) {
  Event* e = r->mutable_event();
  const analysis::detect::DetectorEvent& d = onset.detection;
  e->set_slowdown_ratio(d.ratio);
  e->set_onset_iteration(d.iteration);
  e->set_onset_time_ns(absl::ToUnixNanos(onset.onset_time));
  e->set_healthy_iteration_time_ns(static_cast<int64_t>(std::llround(d.mean_before * 1e9)));
  e->set_slow_iteration_time_ns(static_cast<int64_t>(std::llround(d.mean_after * 1e9)));
  e->set_rank_level(onset.series != kJobSeries);
  r->add_onset_series(onset.series);
  if (int64_t rank = SeriesRank(onset.series); rank >= 0) {
    r->add_suspect_ranks(static_cast<uint32_t>(rank));
  }
  r->set_job_baseline_ns(absl::ToInt64Nanoseconds(onset.job_baseline));
  const int64_t after = std::max<int64_t>(1, d.decided_at - d.iteration + 1);
  r->set_slow_sum_seconds(d.mean_after * static_cast<double>(after));
  r->set_slow_samples(after);
  r->clear_latest_slow_seconds();
  if (d.latest.empty()) {
    r->add_latest_slow_seconds(d.mean_after);
  } else {
    for (double v : d.latest) r->add_latest_slow_seconds(v);
  }
}

EventRecord* EventManager::OpenForced(const std::string& job, int64_t job_iteration,
                                      core::UnitOfWork* uow) {
  const uint64_t id = ids_->NextEventId(&uow->txn());
  EventRecord& r = events_[id];
  Event* e = r.mutable_event();
  const int64_t now = absl::ToUnixNanos(clock_->Now());
  e->set_event_id(id);
  e->set_job(job);
  e->set_cause(falcon::v1::CAUSE_UNSPECIFIED);
  e->set_slowdown_ratio(1.0);
  e->set_onset_iteration(job_iteration);
  e->set_alarm_iteration(job_iteration);
  e->set_verdict_iteration(-1);
  e->set_recovery_iteration(-1);
  e->set_onset_time_ns(now);
  e->set_alarm_time_ns(now);
  r.set_forced(true);
  r.set_phase(falcon::controller::v1::PHASE_PAUSING);
  active_[job].push_back(id);
  e->set_state(falcon::v1::EVENT_STATE_UNSPECIFIED);
  Transition(&r, falcon::v1::EVENT_STATE_CONFIRMED, job_iteration,
             "validation forced by an operator", uow);
  return &r;
}

void EventManager::Attach(EventRecord* event, const SeriesOnset& onset, core::UnitOfWork* uow) {
  if (event->onset_series_size() == 0) {
    // The first slowdown joins a forced validation: the event's figures come from it.
    SetSlowdown(event, onset);
    PersistAtCommit(*event, uow);
    return;
  }
  for (const std::string& s : event->onset_series()) {
    if (s == onset.series) {
      // The series slowed down further (or again after a partial recovery).
      auto* rec = event->mutable_recovered_series();
      rec->erase(std::remove(rec->begin(), rec->end(), onset.series), rec->end());
      PersistAtCommit(*event, uow);
      return;
    }
  }
  event->add_onset_series(onset.series);
  if (int64_t rank = SeriesRank(onset.series); rank >= 0) {
    event->add_suspect_ranks(static_cast<uint32_t>(rank));
  }
  Event* e = event->mutable_event();
  if (onset.detection.iteration < e->onset_iteration() || e->onset_iteration() < 0) {
    e->set_onset_iteration(onset.detection.iteration);
    e->set_onset_time_ns(absl::ToUnixNanos(onset.onset_time));
  }
  if (onset.series == kJobSeries && event->job_baseline_ns() == 0) {
    event->set_job_baseline_ns(
        static_cast<int64_t>(std::llround(onset.detection.mean_before * 1e9)));
  }
  PersistAtCommit(*event, uow);
}

void EventManager::PersistAtCommit(const EventRecord& event, core::UnitOfWork* uow) {
  // Stored once per unit of work, as it stands at the commit: the series of a fleet-sized job
  // join its event by the thousand in one unit, and the record grows with each.
  const uint64_t id = event.event().event_id();
  uow->StageOnceBeforeCommit(absl::StrCat("event/", id), [this, id, uow]() {
    if (const EventRecord* e = Find(id)) Persist(*e, uow);
  });
}

bool EventManager::SeriesRecovered(EventRecord* event, const std::string& series,
                                   const analysis::detect::DetectorEvent& recovery,
                                   core::UnitOfWork* uow) {
  bool member = std::find(event->onset_series().begin(), event->onset_series().end(), series) !=
                event->onset_series().end();
  if (!member) return false;
  if (series == event->onset_series(0) && event->slow_samples() > 0) {
    // The samples from the recovery point to its decision were counted as slow: take them out
    // (their mean is the recovery's mean_after).
    const int64_t k =
        std::min<int64_t>(event->slow_samples() - 1,
                          std::max<int64_t>(0, recovery.decided_at - recovery.iteration + 1));
    if (k > 0) {
      event->set_slow_sum_seconds(event->slow_sum_seconds() -
                                  recovery.mean_after * static_cast<double>(k));
      event->set_slow_samples(event->slow_samples() - k);
      Event* e = event->mutable_event();
      const double mean = event->slow_sum_seconds() / static_cast<double>(event->slow_samples());
      e->set_slow_iteration_time_ns(static_cast<int64_t>(std::llround(mean * 1e9)));
      if (e->healthy_iteration_time_ns() > 0) {
        e->set_slowdown_ratio(mean * 1e9 / static_cast<double>(e->healthy_iteration_time_ns()));
      }
    }
  }
  if (std::find(event->recovered_series().begin(), event->recovered_series().end(), series) ==
      event->recovered_series().end()) {
    event->add_recovered_series(series);
  }
  Persist(*event, uow);
  return event->recovered_series_size() >= event->onset_series_size();
}

void EventManager::Recover(EventRecord* event, int64_t recovery_iteration, int64_t job_iteration,
                           const std::string& reason, core::UnitOfWork* uow) {
  Event* e = event->mutable_event();
  e->set_recovery_iteration(recovery_iteration);
  e->set_recovery_time_ns(absl::ToUnixNanos(clock_->Now()));
  event->set_phase(falcon::controller::v1::PHASE_ENDED);
  // Not before the recovery itself (a rank's summary can be ahead of the job's iterations).
  Transition(event, falcon::v1::EVENT_STATE_RECOVERED, std::max(job_iteration, recovery_iteration),
             reason, uow);
}

void EventManager::Close(EventRecord* event, int64_t job_iteration, const std::string& reason,
                         core::UnitOfWork* uow) {
  event->set_phase(falcon::controller::v1::PHASE_ENDED);
  Transition(event, falcon::v1::EVENT_STATE_CLOSED, job_iteration, reason, uow);
}

void EventManager::CloseTransient(EventRecord* event, int64_t job_iteration,
                                  const std::string& reason, core::UnitOfWork* uow) {
  event->mutable_event()->set_transient(true);
  Close(event, job_iteration, reason, uow);
}

void EventManager::Transition(EventRecord* event, falcon::v1::EventState state, int64_t iteration,
                              const std::string& reason, core::UnitOfWork* uow) {
  Event* e = event->mutable_event();
  const falcon::v1::EventState previous = e->state();
  falcon::v1::StateTransition* t = e->add_transitions();
  t->set_state(state);
  t->set_time_ns(absl::ToUnixNanos(clock_->Now()));
  t->set_iteration(iteration);
  t->set_reason(reason);
  e->set_state(state);
  if (!IsActiveState(state)) Deactivate(e->job(), e->event_id());
  Persist(*event, uow);
  const std::string line = absl::StrCat(
      "event ", metrics::EventStateLabel(state), " job=", e->job(), " event=", e->event_id(),
      CulpritFields(*event), " cause=", metrics::CauseLabel(e->cause()),
      " from=", metrics::EventStateLabel(previous), " iteration=", iteration, " reason=\"", reason,
      "\"");
  uow->AfterCommit([line]() { LOG(INFO) << line; });
  AfterTransition(*e, uow);
}

void EventManager::AfterTransition(const Event& event, core::UnitOfWork* uow) {
  Event copy = event;
  uow->AfterCommit([this, copy]() {
    if (metrics_ != nullptr) {
      auto it = counted_
                    .try_emplace(copy.event_id(), falcon::v1::EVENT_STATE_UNSPECIFIED,
                                 falcon::v1::CAUSE_UNSPECIFIED)
                    .first;
      const auto [previous_state, previous_cause] = it->second;
      it->second = std::make_pair(copy.state(), copy.cause());
      metrics_->EventTransition(previous_state, previous_cause, copy.state(), copy.cause());
      auto active = active_.find(copy.job());
      metrics_->ActiveFailSlows(
          copy.job(), active == active_.end() ? 0 : static_cast<int>(active->second.size()));
    }
    // Copy the watchers: one may unwatch from inside its callback.
    std::vector<Watcher> targets;
    for (const auto& [id, w] : watchers_) {
      if (w.job.empty() || w.job == copy.job()) targets.push_back(w.watcher);
    }
    for (const Watcher& w : targets) w(copy);
  });
}

void EventManager::Persist(const EventRecord& event, core::UnitOfWork* uow) {
  uow->txn().PutEvent(event);
  since_persist_[event.event().job()] = 0;
}

void EventManager::ObserveSeries(const std::string& job, const std::string& series,
                                 int64_t iteration, absl::Duration time) {
  for (EventRecord* event : ActiveEvents(job)) {
    if (event->onset_series_size() == 0 || event->onset_series(0) != series ||
        iteration <= event->event().alarm_iteration() || event->slow_samples() == 0) {
      continue;
    }
    if (std::find(event->recovered_series().begin(), event->recovered_series().end(), series) !=
        event->recovered_series().end()) {
      continue;
    }
    event->set_slow_sum_seconds(event->slow_sum_seconds() + absl::ToDoubleSeconds(time));
    event->set_slow_samples(event->slow_samples() + 1);
    auto* latest = event->mutable_latest_slow_seconds();
    latest->Add(absl::ToDoubleSeconds(time));
    constexpr int kLatest = analysis::detect::OnlineDetectorOptions::kPersistence;
    if (latest->size() > kLatest) latest->erase(latest->begin(), latest->end() - kLatest);
    Event* e = event->mutable_event();
    const double mean = event->slow_sum_seconds() / static_cast<double>(event->slow_samples());
    e->set_slow_iteration_time_ns(static_cast<int64_t>(std::llround(mean * 1e9)));
    if (e->healthy_iteration_time_ns() > 0) {
      e->set_slowdown_ratio(mean * 1e9 / static_cast<double>(e->healthy_iteration_time_ns()));
    }
  }
}

void EventManager::AccountIteration(const std::string& job, int64_t, absl::Duration iteration_time,
                                    core::UnitOfWork* uow, int persist_every) {
  std::vector<EventRecord*> events = ActiveEvents(job);
  auto baseline_of = [](const EventRecord* r) {
    return r->job_baseline_ns() > 0 ? r->job_baseline_ns() : r->event().healthy_iteration_time_ns();
  };
  bool any = false;
  for (size_t i = 0; i < events.size(); ++i) {
    EventRecord* event = events[i];
    if (event->event().state() == falcon::v1::EVENT_STATE_SUSPECTED) continue;
    const int64_t baseline = baseline_of(event);
    // The slowdown above the next newer event's baseline is that event's.
    absl::Duration t = iteration_time;
    if (i + 1 < events.size() && baseline_of(events[i + 1]) > baseline) {
      t = std::min(t, absl::Nanoseconds(baseline_of(events[i + 1])));
    }
    const double lost = absl::ToDoubleSeconds(t - absl::Nanoseconds(baseline));
    if (lost <= 0) continue;
    Event* e = event->mutable_event();
    e->set_lost_seconds(e->lost_seconds() + lost);
    any = true;
  }
  if (!any || ++since_persist_[job] < persist_every) return;
  for (EventRecord* event : events) Persist(*event, uow);
}

EventRecord* EventManager::Active(const std::string& job) {
  auto it = active_.find(job);
  return it == active_.end() || it->second.empty() ? nullptr : Find(it->second.back());
}

const EventRecord* EventManager::Active(const std::string& job) const {
  auto it = active_.find(job);
  return it == active_.end() || it->second.empty() ? nullptr : Find(it->second.back());
}

std::vector<EventRecord*> EventManager::ActiveEvents(const std::string& job) {
  std::vector<EventRecord*> out;
  auto it = active_.find(job);
  if (it == active_.end()) return out;
  for (uint64_t id : it->second) {
    if (EventRecord* r = Find(id)) out.push_back(r);
  }
  return out;
}

std::vector<const EventRecord*> EventManager::ActiveEvents(const std::string& job) const {
  std::vector<const EventRecord*> out;
  auto it = active_.find(job);
  if (it == active_.end()) return out;
  for (uint64_t id : it->second) {
    if (const EventRecord* r = Find(id)) out.push_back(r);
  }
  return out;
}

EventRecord* EventManager::Localizing(const std::string& job) {
  for (EventRecord* r : ActiveEvents(job)) {
    if (AwaitsVerdict(r->event())) return r;
  }
  return nullptr;
}

EventRecord* EventManager::Find(uint64_t event_id) {
  auto it = events_.find(event_id);
  return it == events_.end() ? nullptr : &it->second;
}

const EventRecord* EventManager::Find(uint64_t event_id) const {
  auto it = events_.find(event_id);
  return it == events_.end() ? nullptr : &it->second;
}

std::vector<const EventRecord*> EventManager::List(const std::string& job, bool active_only,
                                                   uint32_t limit) const {
  std::vector<const EventRecord*> out;
  for (auto it = events_.rbegin(); it != events_.rend(); ++it) {
    const Event& e = it->second.event();
    if (!job.empty() && e.job() != job) continue;
    if (active_only && !IsActiveState(e.state())) continue;
    out.push_back(&it->second);
    if (limit > 0 && out.size() >= limit) break;
  }
  return out;
}

std::vector<const EventRecord*> EventManager::ListBefore(const std::string& job, bool active_only,
                                                         uint64_t before_id, size_t max) const {
  std::vector<const EventRecord*> out;
  auto it = before_id == 0 ? events_.end() : events_.lower_bound(before_id);
  while (it != events_.begin() && out.size() < max) {
    --it;
    const Event& e = it->second.event();
    if (!job.empty() && e.job() != job) continue;
    if (active_only && !IsActiveState(e.state())) continue;
    out.push_back(&it->second);
  }
  return out;
}

absl::Time EventManager::EndTime(const Event& event) {
  if (IsActiveState(event.state())) return absl::InfiniteFuture();
  int64_t end_ns = 0;
  for (const falcon::v1::StateTransition& t : event.transitions()) {
    end_ns = std::max(end_ns, t.time_ns());
  }
  for (const falcon::v1::Action& a : event.actions()) end_ns = std::max(end_ns, a.time_ns());
  return absl::FromUnixNanos(end_ns);
}

std::vector<uint64_t> EventManager::Expired(
    absl::Time cutoff, size_t max, const absl::flat_hash_set<std::string>& skip_jobs) const {
  std::vector<uint64_t> out;
  for (const auto& [id, r] : events_) {
    if (out.size() >= max) break;
    if (EndTime(r.event()) > cutoff || skip_jobs.count(r.event().job())) continue;
    out.push_back(id);
  }
  return out;
}

std::vector<uint64_t> EventManager::EventsOfJobs(
    const absl::flat_hash_set<std::string>& jobs) const {
  std::vector<uint64_t> out;
  if (jobs.empty()) return out;
  for (const auto& [id, r] : events_) {
    if (jobs.count(r.event().job())) out.push_back(id);
  }
  return out;
}

void EventManager::Forget(const std::vector<uint64_t>& event_ids,
                          const absl::flat_hash_set<std::string>& jobs) {
  for (uint64_t id : event_ids) {
    auto it = events_.find(id);
    if (it == events_.end()) continue;
    const Event& e = it->second.event();
    Deactivate(e.job(), id);
    if (metrics_ != nullptr) metrics_->EventForgotten(e.state(), e.cause());
    events_.erase(it);
  }
  for (const std::string& job : jobs) {
    active_.erase(job);
    since_persist_.erase(job);
  }
}

std::vector<EventRecord*> EventManager::OpenEvents() {
  std::vector<EventRecord*> out;
  for (auto& [id, r] : events_) {
    if (IsActiveState(r.event().state())) out.push_back(&r);
  }
  return out;
}

uint64_t EventManager::Watch(const std::string& job, Watcher watcher) {
  uint64_t id = next_watch_++;
  watchers_[id] = WatchEntry{job, std::move(watcher)};
  return id;
}

void EventManager::Unwatch(uint64_t watch_id) { watchers_.erase(watch_id); }

}  // namespace falcon::controller::detection
