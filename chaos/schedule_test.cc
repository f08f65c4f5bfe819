#include "chaos/schedule.h"

#include "chaos/fake_runner.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace falcon::chaos {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

cluster::ClusterSpec TwoNodes() {
  cluster::ClusterSpec c;
  c.kind = cluster::ClusterKind::kNetns;
  c.prefix = "fns";
  c.controller_address = "10.9.0.254";
  c.nodes = {{"node0", "fns-node0", "10.9.0.1", "eth0", "fnsh0"},
             {"node1", "fns-node1", "10.9.0.2", "eth0", "fnsh1"}};
  return c;
}

FaultSpec Spec(const std::string& text) {
  absl::StatusOr<FaultSpec> s = ParseFaultSpec(text, 2);
  EXPECT_TRUE(s.ok()) << s.status();
  return *s;
}

class ScheduleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<Driver>> d = Driver::Create(TwoNodes(), {}, &fake_, &clock_);
    ASSERT_TRUE(d.ok());
    driver_ = *std::move(d);
    start_ = clock_.Now();
  }
  FakeRunner fake_;
  common::FakeClock clock_;
  std::unique_ptr<Driver> driver_;
  absl::Time start_;
};

TEST_F(ScheduleTest, AppliesAndRemovesOnTime) {
  Schedule s({Spec("nic:node=node0,rate=1mbit,from=10,until=20"),
              Spec("link:src=node1,dst=node0,rate=1mbit,from=15,until=30")},
             start_);
  EXPECT_EQ(s.Next(), start_ + absl::Seconds(10));
  ASSERT_TRUE(s.Step(*driver_, clock_.Now()).ok());
  EXPECT_THAT(driver_->applied(), IsEmpty());
  clock_.Advance(absl::Seconds(10));
  ASSERT_TRUE(s.Step(*driver_, clock_.Now()).ok());
  EXPECT_THAT(driver_->applied(), ElementsAre(1));
  EXPECT_EQ(s.Next(), start_ + absl::Seconds(15));
  clock_.Advance(absl::Seconds(5));
  ASSERT_TRUE(s.Step(*driver_, clock_.Now()).ok());
  EXPECT_THAT(driver_->applied(), ElementsAre(1, 2));
  EXPECT_EQ(s.Next(), start_ + absl::Seconds(20));
  clock_.Advance(absl::Seconds(5));
  ASSERT_TRUE(s.Step(*driver_, clock_.Now()).ok());
  EXPECT_THAT(driver_->applied(), ElementsAre(2));
  EXPECT_FALSE(s.Done());
  clock_.Advance(absl::Seconds(10));
  ASSERT_TRUE(s.Step(*driver_, clock_.Now()).ok());
  EXPECT_THAT(driver_->applied(), IsEmpty());
  EXPECT_TRUE(s.Done());
  EXPECT_FALSE(s.Next().has_value());
  const Record& r = driver_->record();
  EXPECT_EQ(*r.faults[0].applied_unix_ms - r.started_unix_ms, 10'000);
  EXPECT_EQ(*r.faults[0].removed_unix_ms - r.started_unix_ms, 20'000);
  EXPECT_EQ(*r.faults[1].removed_unix_ms - r.started_unix_ms, 30'000);
}

TEST_F(ScheduleTest, FaultWithoutUntilStaysUntilTheDriverStops) {
  Schedule s({Spec("nic:node=node0,rate=1mbit")}, start_);
  ASSERT_TRUE(s.Step(*driver_, clock_.Now()).ok());
  EXPECT_THAT(driver_->applied(), ElementsAre(1));
  EXPECT_FALSE(s.Next().has_value());
  EXPECT_FALSE(s.Done());
}

TEST_F(ScheduleTest, LateStepStillAppliesAndRemoves) {
  Schedule s({Spec("nic:node=node0,rate=1mbit,from=1,until=2")}, start_);
  clock_.Advance(absl::Seconds(5));
  ASSERT_TRUE(s.Step(*driver_, clock_.Now()).ok());
  EXPECT_TRUE(s.Done());
  EXPECT_TRUE(driver_->record().faults[0].applied_unix_ms.has_value());
  EXPECT_TRUE(driver_->record().faults[0].removed_unix_ms.has_value());
}

TEST_F(ScheduleTest, FailureStopsTheStep) {
  fake_.OnRun("tc -n fns-node0 qdisc add", {2, "", "Error: nope.\n"});
  Schedule s({Spec("nic:node=node0,rate=1mbit"), Spec("nic:node=node1,rate=1mbit")}, start_);
  const absl::Status st = s.Step(*driver_, clock_.Now());
  EXPECT_THAT(st.message(), HasSubstr("fault 1 (nic:node=node0,rate=1mbit): tc -n fns-node0"));
  EXPECT_EQ(driver_->record().faults.size(), 1u);
}

}  // namespace
}  // namespace falcon::chaos
