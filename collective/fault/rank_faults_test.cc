#include "collective/fault/rank_faults.h"

#include "gtest/gtest.h"

namespace falcon::collective::fault {
namespace {

TEST(RankFaultsTest, KeepsThisRanksFaults) {
  auto f = RankFaults::Create(
      "compute:rank=1,factor=2,from=5;contention:rank=1,cpus=0,from=10,to=11;"
      "link:src=1,dst=0,delay_ms=1",
      1, /*burn=*/false);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_DOUBLE_EQ((*f)->compute().FactorAt(4), 1.0);
  EXPECT_DOUBLE_EQ((*f)->compute().FactorAt(5), 2.0);
  EXPECT_EQ((*f)->plan().links.size(), 1u);
  EXPECT_TRUE((*f)->contention().has_faults());
  ASSERT_TRUE((*f)->OnIteration(10).ok());
  EXPECT_EQ((*f)->contention().running_pids().size(), 1u);
  ASSERT_TRUE((*f)->OnIteration(11).ok());
  EXPECT_TRUE((*f)->contention().running_pids().empty());
}

TEST(RankFaultsTest, EmptySpecMeansNoFaultsAndBadSpecIsAnError) {
  auto none = RankFaults::Create("", 0);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE((*none)->plan().empty());
  EXPECT_EQ((*none)->compute().ExtraFor(3, absl::Seconds(1)), absl::ZeroDuration());
  EXPECT_TRUE((*none)->OnIteration(3).ok());
  EXPECT_EQ(RankFaults::Create("compute:rank=0", 0).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace falcon::collective::fault
