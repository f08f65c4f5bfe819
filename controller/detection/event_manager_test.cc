#include "controller/detection/event_manager.h"

#include <prometheus/registry.h>

#include <map>
#include <string>
#include <vector>

#include "common/testing/log_capture.h"
#include "common/testing/series_value.h"
#include "controller/metrics/metric_table.h"
#include "controller/store/in_memory_kv_store.h"
#include "gtest/gtest.h"

namespace falcon::controller::detection {
namespace {

using falcon::controller::v1::EventRecord;

class EventManagerTest : public ::testing::Test {
 protected:
  EventManagerTest()
      : kv_(store::ControllerStore::TableNames()),
        store_(&kv_, &clock_),
        metrics_(registry_, "t"),
        ids_(falcon::controller::v1::MetaRecord{}),
        events_(&clock_, &ids_, &metrics_) {}

  SeriesOnset Onset(const std::string& series, int64_t iteration) {
    SeriesOnset o;
    o.series = series;
    o.detection.kind = analysis::detect::ChangeKind::kSlowdown;
    o.detection.iteration = iteration;
    o.detection.decided_at = iteration + 3;
    o.detection.ratio = 1.5;
    o.detection.mean_before = 0.4;
    o.detection.mean_after = 0.6;
    o.onset_time = clock_.Now() - absl::Seconds(2);
    o.job_iteration = iteration + 3;
    o.job_baseline = absl::Milliseconds(400);
    return o;
  }
  double Gauge(const std::string& name, const std::map<std::string, std::string>& labels) {
    return common::testing::SeriesValue(registry_.Collect(), name, labels).value_or(-1);
  }

  common::FakeClock clock_;
  store::InMemoryKvStore kv_;
  store::ControllerStore store_;
  prometheus::Registry registry_;
  metrics::ControllerMetrics metrics_;
  core::IdAllocator ids_;
  EventManager events_;
};

TEST_F(EventManagerTest, OpenRecordsSuspectedAndConfirmedAndNotifiesAfterCommit) {
  std::vector<falcon::v1::Event> seen;
  events_.Watch("j", [&](const falcon::v1::Event& e) { seen.push_back(e); });
  events_.Watch("other", [&](const falcon::v1::Event&) { FAIL() << "wrong job"; });
  core::UnitOfWork uow;
  EventRecord* e = events_.Open("j", Onset(RankSeries(6), 181), &uow);
  EXPECT_TRUE(seen.empty());
  ASSERT_TRUE(uow.Commit(&store_).ok());
  ASSERT_EQ(seen.size(), 2u);  // SUSPECTED, CONFIRMED
  EXPECT_EQ(seen.back().state(), falcon::v1::EVENT_STATE_CONFIRMED);
  const falcon::v1::Event& ev = e->event();
  EXPECT_EQ(ev.event_id(), 1u);
  EXPECT_EQ(ev.onset_iteration(), 181);
  EXPECT_EQ(ev.alarm_iteration(), 184);
  EXPECT_EQ(ev.verdict_iteration(), -1);
  EXPECT_TRUE(ev.rank_level());
  EXPECT_EQ(ev.healthy_iteration_time_ns(), 400'000'000);
  EXPECT_EQ(ev.transitions_size(), 2);
  EXPECT_EQ(ev.transitions(0).state(), falcon::v1::EVENT_STATE_SUSPECTED);
  EXPECT_EQ(ev.transitions(0).iteration(), 181);
  EXPECT_EQ(e->suspect_ranks(0), 6u);
  EXPECT_EQ(events_.Active("j"), e);
  EXPECT_EQ(Gauge(metrics::kEvents.name, {{"state", "confirmed"}, {"cause", "none"}}), 1);
  EXPECT_EQ(Gauge(metrics::kActiveFailSlows.name, {{"job", "j"}}), 1);
  // Stored.
  auto stored = store_.LoadEvents();
  ASSERT_EQ(stored->size(), 1u);
  EXPECT_EQ((*stored)[0].event().state(), falcon::v1::EVENT_STATE_CONFIRMED);
}

TEST_F(EventManagerTest, JoinedSeriesMustAllRecover) {
  core::UnitOfWork uow;
  EventRecord* e = events_.Open("j", Onset(RankSeries(6), 181), &uow);
  events_.Attach(e, Onset(kJobSeries, 180), &uow);
  events_.Attach(e, Onset(kJobSeries, 183), &uow);  // Same series again: no duplicate.
  EXPECT_EQ(e->onset_series_size(), 2);
  EXPECT_EQ(e->event().onset_iteration(), 180);  // The earlier onset wins.
  analysis::detect::DetectorEvent rec;
  rec.kind = analysis::detect::ChangeKind::kRecovery;
  EXPECT_FALSE(events_.SeriesRecovered(e, RankSeries(6), rec, &uow));
  EXPECT_FALSE(events_.SeriesRecovered(e, RankSeries(3), rec, &uow));  // Not a member.
  EXPECT_TRUE(events_.SeriesRecovered(e, kJobSeries, rec, &uow));
  events_.Recover(e, 195, 202, "back", &uow);
  ASSERT_TRUE(uow.Commit(&store_).ok());
  EXPECT_EQ(e->event().state(), falcon::v1::EVENT_STATE_RECOVERED);
  EXPECT_EQ(e->event().recovery_iteration(), 195);
  EXPECT_EQ(events_.Active("j"), nullptr);
  EXPECT_EQ(Gauge(metrics::kActiveFailSlows.name, {{"job", "j"}}), 0);
  EXPECT_EQ(Gauge(metrics::kEvents.name, {{"state", "recovered"}, {"cause", "none"}}), 1);
  // A new onset now opens a second event.
  EventRecord* second = events_.Open("j", Onset(kJobSeries, 300), &uow);
  EXPECT_EQ(second->event().event_id(), 2u);
  EXPECT_EQ(events_.List("j", false, 0).size(), 2u);
  EXPECT_EQ(events_.List("j", true, 0).size(), 1u);
  EXPECT_EQ(events_.List("", false, 1)[0]->event().event_id(), 2u);
}

// Every series of falcon_controller_events, to check that none went negative.
TEST_F(EventManagerTest, EventsGaugeFollowsCauseChangesAndNeverGoesNegative) {
  auto all_series = [&]() {
    std::map<std::string, double> out;
    for (const auto& f : registry_.Collect()) {
      if (f.name != metrics::kEvents.name) continue;
      for (const auto& m : f.metric) {
        std::string key;
        for (const auto& l : m.label) key += l.name + "=" + l.value + " ";
        out[key] = m.gauge.value;
      }
    }
    return out;
  };
  core::UnitOfWork uow;
  // A compute event: opened without a cause, the verdict sets the cause before its transition
  // (as the localizer does), then mitigating and recovered.
  EventRecord* e = events_.Open("j", Onset(RankSeries(2), 50), &uow);
  e->mutable_event()->set_cause(falcon::v1::CAUSE_COMPUTE);
  events_.Transition(e, falcon::v1::EVENT_STATE_LOCALIZED, 55, "compute", &uow);
  events_.Transition(e, falcon::v1::EVENT_STATE_MITIGATING, 56, "S2", &uow);
  events_.Recover(e, 90, 92, "back", &uow);
  // A communication event closed while localized.
  EventRecord* f = events_.Open("j", Onset(kJobSeries, 100), &uow);
  f->mutable_event()->set_cause(falcon::v1::CAUSE_COMMUNICATION);
  events_.Transition(f, falcon::v1::EVENT_STATE_LOCALIZED, 105, "link", &uow);
  events_.Close(f, 110, "job ended", &uow);
  ASSERT_TRUE(uow.Commit(&store_).ok());
  for (const auto& [series, value] : all_series()) {
    EXPECT_GE(value, 0) << series;
  }
  EXPECT_EQ(Gauge(metrics::kEvents.name, {{"state", "confirmed"}, {"cause", "none"}}), 0);
  EXPECT_EQ(Gauge(metrics::kEvents.name, {{"state", "recovered"}, {"cause", "compute"}}), 1);
  EXPECT_EQ(Gauge(metrics::kEvents.name, {{"state", "closed"}, {"cause", "communication"}}), 1);
  double total = 0;
  for (const auto& [series, value] : all_series()) total += value;
  EXPECT_EQ(total, 2);
}

TEST_F(EventManagerTest, ASlowdownJoiningAForcedValidationGivesTheEventItsFigures) {
  core::UnitOfWork uow;
  EventRecord* e = events_.OpenForced("j", 70, &uow);
  EXPECT_EQ(e->event().healthy_iteration_time_ns(), 0);
  EXPECT_TRUE(e->onset_series().empty());
  events_.Attach(e, Onset(RankSeries(3), 72), &uow);
  ASSERT_TRUE(uow.Commit(&store_).ok());
  EXPECT_EQ(e->onset_series_size(), 1);
  EXPECT_EQ(e->event().onset_iteration(), 72);
  EXPECT_EQ(e->event().healthy_iteration_time_ns(), 400'000'000);
  EXPECT_EQ(e->event().slow_iteration_time_ns(), 600'000'000);
  EXPECT_DOUBLE_EQ(e->event().slowdown_ratio(), 1.5);
  EXPECT_TRUE(e->event().rank_level());
  EXPECT_EQ(e->job_baseline_ns(), 400'000'000);
  // The running slow mean follows the series from there.
  events_.ObserveSeries("j", RankSeries(3), 100, absl::Milliseconds(600));
  EXPECT_EQ(e->slow_samples(), 5);
}

// The first onset series' latest times while slow: those the detector decided on, then each new
// one, the latest 3 kept (the slowdown when validation runs, docs/algorithms.md#verdict).
TEST_F(EventManagerTest, TheLatestSlowTimesFollowTheFirstOnsetSeries) {
  core::UnitOfWork uow;
  SeriesOnset onset = Onset(RankSeries(3), 72);
  onset.detection.latest = {0.61, 0.62, 0.63};
  EventRecord* e = events_.Open("j", onset, &uow);
  ASSERT_TRUE(uow.Commit(&store_).ok());
  EXPECT_EQ(std::vector<double>(e->latest_slow_seconds().begin(), e->latest_slow_seconds().end()),
            (std::vector<double>{0.61, 0.62, 0.63}));
  events_.ObserveSeries("j", RankSeries(3), 76, absl::Milliseconds(700));
  events_.ObserveSeries("j", RankSeries(1), 76, absl::Milliseconds(900));  // Not the onset's.
  events_.ObserveSeries("j", RankSeries(3), 77, absl::Milliseconds(800));
  EXPECT_EQ(std::vector<double>(e->latest_slow_seconds().begin(), e->latest_slow_seconds().end()),
            (std::vector<double>{0.63, 0.7, 0.8}));
  // A detection with no latest times (what an environment shift leaves): its mean after.
  EventRecord* f = events_.Open("k", Onset(kJobSeries, 80), &uow);
  ASSERT_EQ(f->latest_slow_seconds_size(), 1);
  EXPECT_DOUBLE_EQ(f->latest_slow_seconds(0), 0.6);
}

TEST_F(EventManagerTest, TransitionsHappenWhereTheirReasonsSayAndNameNoRankBeforeAVerdict) {
  common::testing::LogCapture log;
  core::UnitOfWork uow;
  SeriesOnset onset = Onset(RankSeries(0), 60);  // Decided at 63 ...
  onset.job_iteration = 61;                      // ... while the job completed only 61.
  EventRecord* e = events_.Open("j", onset, &uow);
  ASSERT_TRUE(uow.Commit(&store_).ok());
  EXPECT_EQ(e->event().alarm_iteration(), 63);
  EXPECT_EQ(e->event().transitions(1).state(), falcon::v1::EVENT_STATE_CONFIRMED);
  EXPECT_EQ(e->event().transitions(1).iteration(), 63);
  // Rank 0 slowed first, which does not make it the culprit: no rank until the verdict.
  ASSERT_EQ(log.Count("event opened job=j event=1 state=suspected series=rank/0 "), 1);
  ASSERT_EQ(log.Count("event confirmed job=j event=1 cause=none "), 1);
  e->mutable_event()->set_cause(falcon::v1::CAUSE_COMPUTE);
  e->mutable_event()->add_ranks(2);
  events_.Transition(e, falcon::v1::EVENT_STATE_LOCALIZED, 66, "compute", &uow);
  // A recovery seen in a rank's summary ahead of the job's iterations.
  events_.Recover(e, 90, 88, "back at iteration 90", &uow);
  ASSERT_TRUE(uow.Commit(&store_).ok());
  EXPECT_EQ(log.Count("event localized job=j event=1 rank=2 cause=compute"), 1);
  EXPECT_EQ(e->event().transitions(e->event().transitions_size() - 1).iteration(), 90);
  EXPECT_EQ(e->event().recovery_iteration(), 90);
}

TEST_F(EventManagerTest, LostSecondsAgainstBaselineAndReload) {
  core::UnitOfWork uow;
  EventRecord* e = events_.Open("j", Onset(kJobSeries, 10), &uow);
  for (int i = 0; i < 4; ++i) events_.AccountIteration("j", 13 + i, absl::Milliseconds(600), &uow);
  events_.AccountIteration("j", 17, absl::Milliseconds(300), &uow);  // Faster than baseline.
  EXPECT_NEAR(e->event().lost_seconds(), 0.8, 1e-9);
  events_.Close(e, 20, "job ended", &uow);
  ASSERT_TRUE(uow.Commit(&store_).ok());
  events_.Open("k", Onset(kJobSeries, 5), &uow);
  ASSERT_TRUE(uow.Commit(&store_).ok());

  EventManager reloaded(&clock_, &ids_, nullptr);
  reloaded.Load(*store_.LoadEvents());
  EXPECT_EQ(reloaded.Active("j"), nullptr);
  ASSERT_NE(reloaded.Active("k"), nullptr);
  EXPECT_EQ(reloaded.OpenEvents().size(), 1u);
  EXPECT_NEAR(reloaded.Find(1)->event().lost_seconds(), 0.8, 1e-9);
  EXPECT_EQ(reloaded.Find(1)->event().state(), falcon::v1::EVENT_STATE_CLOSED);
}

TEST_F(EventManagerTest, SeriesNames) {
  EXPECT_EQ(SeriesRank(RankSeries(12)), 12);
  EXPECT_EQ(SeriesRank(kJobSeries), -1);
  EXPECT_EQ(SeriesRank("rank/x"), -1);
}

// Several active events of one job (docs/algorithms.md#concurrent-events): each is listed, the
// gauge counts them, lost time is split at the newer event's baseline, and a restart from the
// store restores them all.
TEST_F(EventManagerTest, SeveralActiveEventsPerJobSurviveARestart) {
  core::UnitOfWork uow;
  EventRecord* first = events_.Open("j", Onset(RankSeries(5), 100), &uow);
  events_.Transition(first, falcon::v1::EVENT_STATE_LOCALIZED, 110, "compute: rank 5", &uow);
  EXPECT_EQ(events_.Localizing("j"), nullptr);
  SeriesOnset later = Onset(RankSeries(2), 200);
  later.job_baseline = absl::Milliseconds(500);  // The level the first event left.
  EventRecord* second = events_.Open("j", later, &uow);
  ASSERT_TRUE(uow.Commit(&store_).ok());
  EXPECT_EQ(events_.Localizing("j"), second);
  EXPECT_EQ(events_.Active("j"), second);  // The newest.
  ASSERT_EQ(events_.ActiveEvents("j").size(), 2u);
  EXPECT_EQ(Gauge(metrics::kActiveFailSlows.name, {{"job", "j"}}), 2);

  // 0.7 s: the first event is charged 0.5 - 0.4, the second 0.7 - 0.5.
  core::UnitOfWork account;
  events_.AccountIteration("j", 205, absl::Milliseconds(700), &account, 1);
  ASSERT_TRUE(account.Commit(&store_).ok());
  EXPECT_NEAR(first->event().lost_seconds(), 0.1, 1e-9);
  EXPECT_NEAR(second->event().lost_seconds(), 0.2, 1e-9);

  EventManager reloaded(&clock_, &ids_, nullptr);
  reloaded.Load(*store_.LoadEvents());
  std::vector<EventRecord*> active = reloaded.ActiveEvents("j");
  ASSERT_EQ(active.size(), 2u);
  EXPECT_EQ(active[0]->event().event_id(), first->event().event_id());
  EXPECT_EQ(active[1]->event().event_id(), second->event().event_id());
  EXPECT_EQ(reloaded.Localizing("j")->event().event_id(), second->event().event_id());

  // A transient close ends only that event.
  core::UnitOfWork close;
  events_.CloseTransient(second, 206, "transient: gone before the verdict", &close);
  ASSERT_TRUE(close.Commit(&store_).ok());
  EXPECT_TRUE(second->event().transient());
  EXPECT_EQ(second->event().state(), falcon::v1::EVENT_STATE_CLOSED);
  EXPECT_EQ(events_.Active("j"), first);
  EXPECT_EQ(Gauge(metrics::kActiveFailSlows.name, {{"job", "j"}}), 1);
}

}  // namespace
}  // namespace falcon::controller::detection
