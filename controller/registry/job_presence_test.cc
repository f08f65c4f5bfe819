#include "controller/registry/job_presence.h"

#include "gtest/gtest.h"

namespace falcon::controller::registry {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1000);
constexpr absl::Duration kGrace = absl::Seconds(120);

TEST(JobPresenceTest, AJobIsUnreportedOnceEveryAgentIsAwayFromTheLastDeparture) {
  JobPresence p(kGrace);
  const std::vector<std::string> agents = {"a", "b"};
  EXPECT_FALSE(p.UnreportedSince("job", agents).has_value()) << "no record: reporting";
  EXPECT_TRUE(p.Away("job", "a", kT0));
  EXPECT_FALSE(p.UnreportedSince("job", agents).has_value()) << "b still reports it";
  EXPECT_TRUE(p.Away("job", "b", kT0 + absl::Seconds(30)));
  EXPECT_EQ(p.UnreportedSince("job", agents), kT0 + absl::Seconds(30));
  // A second departure (a hello without the job after the stream ended) keeps the first time.
  EXPECT_FALSE(p.Away("job", "b", kT0 + absl::Seconds(40)));
  EXPECT_EQ(p.UnreportedSince("job", agents), kT0 + absl::Seconds(30));
  EXPECT_EQ(p.Back("job", "a", kT0 + absl::Seconds(50)), absl::Seconds(50));
  EXPECT_FALSE(p.UnreportedSince("job", agents).has_value());
  EXPECT_FALSE(p.Back("job", "a", kT0 + absl::Seconds(51)).has_value()) << "already back";
}

TEST(JobPresenceTest, ExpiredAgentsAreThoseAwayForTheGrace) {
  JobPresence p(kGrace);
  p.Away("job", "a", kT0);
  p.Away("job", "b", kT0 + absl::Seconds(10));
  EXPECT_TRUE(p.Expired("job", kT0 + kGrace - absl::Nanoseconds(1)).empty());
  auto expired = p.Expired("job", kT0 + kGrace);
  ASSERT_EQ(expired.size(), 1u);
  EXPECT_EQ(expired[0].first, "a");
  EXPECT_EQ(expired[0].second, kT0);
  p.Forget("job", "a");
  EXPECT_FALSE(p.IsAway("job", "a"));
  EXPECT_TRUE(p.IsAway("job", "b"));
  p.Forget("job");
  EXPECT_TRUE(p.Jobs().empty());
}

TEST(JobPresenceTest, RejoiningLastsTheGraceOfTheAbsenceAlsoAfterComingBack) {
  JobPresence p(kGrace);
  EXPECT_FALSE(p.Rejoining("job", "a", kT0));
  p.Away("job", "a", kT0);
  EXPECT_TRUE(p.Rejoining("job", "a", kT0 + absl::Seconds(5)));
  p.Back("job", "a", kT0 + absl::Seconds(5));
  EXPECT_FALSE(p.IsAway("job", "a"));
  EXPECT_TRUE(p.Rejoining("job", "a", kT0 + absl::Seconds(60))) << "its other shims come back";
  p.Prune(kT0 + absl::Seconds(60));
  EXPECT_EQ(p.Jobs(), std::vector<std::string>{"job"});
  EXPECT_FALSE(p.Rejoining("job", "a", kT0 + kGrace));
  p.Prune(kT0 + kGrace);
  EXPECT_TRUE(p.Jobs().empty());
  // Away again later: a new absence with its own grace.
  EXPECT_TRUE(p.Away("job", "a", kT0 + absl::Seconds(500)));
  EXPECT_TRUE(p.Rejoining("job", "a", kT0 + absl::Seconds(501)));
}

TEST(JobPresenceTest, AJobIsHeldWhileAnAgentIsAwayWithinTheGrace) {
  JobPresence p(kGrace);
  EXPECT_FALSE(p.Held("job", kT0));
  p.Away("job", "a", kT0);
  EXPECT_TRUE(p.Held("job", kT0 + kGrace - absl::Seconds(1)));
  EXPECT_FALSE(p.Held("job", kT0 + kGrace)) << "not beyond the grace";
  p.Back("job", "a", kT0 + absl::Seconds(1));
  EXPECT_FALSE(p.Held("job", kT0 + absl::Seconds(1)));
}

TEST(JobPresenceTest, PruneKeepsAgentsStillAway) {
  JobPresence p(kGrace);
  p.Away("job", "a", kT0);
  p.Prune(kT0 + 10 * kGrace);
  EXPECT_TRUE(p.IsAway("job", "a"));
}

}  // namespace
}  // namespace falcon::controller::registry
