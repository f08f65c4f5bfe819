#include "deploy/demo/live.h"

#include "gtest/gtest.h"

namespace falcon::deploy::demo {
namespace {

TEST(LiveLineTest, HealthyJob) {
  falcon::v1::Job job;
  job.set_last_iteration(318);
  job.set_iteration_time_ns(231'000'000);
  job.set_state(falcon::v1::JOB_STATE_TRACKING);
  std::string line = LiveLine(42, job, {});
  EXPECT_NE(line.find("it   318"), std::string::npos) << line;
  EXPECT_NE(line.find("0.231 s/it"), std::string::npos) << line;
  EXPECT_NE(line.find("TRACKING"), std::string::npos) << line;
  EXPECT_EQ(line.back(), '-') << line;
}

TEST(LiveLineTest, ShowsNewestActiveEventWithCulpritAndLastAction) {
  falcon::v1::Job job;
  job.set_state(falcon::v1::JOB_STATE_MITIGATING);
  falcon::v1::Event old_event, e;
  old_event.set_event_id(1);
  e.set_event_id(2);
  e.set_cause(falcon::v1::CAUSE_COMMUNICATION);
  auto* l = e.add_links();
  l->set_src_rank(1);
  l->set_dst_rank(5);
  e.set_slowdown_ratio(1.4);
  e.set_state(falcon::v1::EVENT_STATE_MITIGATING);
  auto* s2 = e.add_actions();
  s2->set_strategy(falcon::v1::STRATEGY_S2_MICRO_BATCH);
  s2->set_directive_id(1);
  auto* s3 = e.add_actions();
  s3->set_strategy(falcon::v1::STRATEGY_S3_TOPOLOGY);
  s3->set_directive_id(2);
  e.add_actions()->set_strategy(falcon::v1::STRATEGY_S4_CHECKPOINT_RESTART);  // Skipped.
  std::string line = LiveLine(1, job, {old_event, e});
  EXPECT_NE(line.find("MITIGATING"), std::string::npos) << line;
  EXPECT_NE(line.find("event 2 COMMUNICATION link 1->5 x1.40 [MITIGATING, S3] +1"),
            std::string::npos)
      << line;
}

TEST(LiveLineTest, LongCulpritListsAreShortened) {
  falcon::v1::Event e;
  e.set_event_id(1);
  e.set_cause(falcon::v1::CAUSE_COMPUTE);
  for (uint32_t r = 0; r < 8; ++r) e.add_ranks(r);
  std::string line = LiveLine(1, falcon::v1::Job(), {e});
  EXPECT_NE(line.find("rank 0, rank 1, +6 more"), std::string::npos) << line;
}

TEST(LiveLineTest, ANodeNicFaultShowsTheNodeNotItsLinks) {
  falcon::v1::Event e;
  e.set_event_id(3);
  e.set_cause(falcon::v1::CAUSE_COMMUNICATION);
  e.set_slowdown_ratio(1.6);
  e.set_state(falcon::v1::EVENT_STATE_LOCALIZED);
  e.add_nodes("node2");
  for (uint32_t peer : {0, 1, 6, 7}) {
    auto* l = e.add_links();
    l->set_src_rank(4);
    l->set_dst_rank(peer);
  }
  std::string line = LiveLine(1, falcon::v1::Job(), {e});
  EXPECT_NE(line.find("event 3 COMMUNICATION node2's NIC x1.60 [LOCALIZED]"), std::string::npos)
      << line;
  EXPECT_EQ(line.find("link"), std::string::npos) << line;
}

TEST(LiveLineTest, StartingJob) {
  EXPECT_NE(LiveLine(0, falcon::v1::Job(), {}).find("STARTING"), std::string::npos);
}

}  // namespace
}  // namespace falcon::deploy::demo
