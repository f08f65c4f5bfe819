#include "analysis/detect/peer_links.h"

#include "gtest/gtest.h"

namespace falcon::analysis::detect {
namespace {

// A ring of `n` ranks in one DP communicator: i -> i+1, each moving 64 MiB in `busy_ms`.
std::map<PeerLinkKey, PeerLinkTotals> Ring(int n, double busy_ms = 10) {
  std::map<PeerLinkKey, PeerLinkTotals> links;
  for (int i = 0; i < n; ++i) {
    PeerLinkTotals& t = links[{static_cast<uint32_t>(i), static_cast<uint32_t>((i + 1) % n), 7}];
    t.group = "COMM_KIND_DP";
    t.bytes = 64 << 20;
    t.busy = absl::Milliseconds(busy_ms);
    t.transfers = 3;
  }
  return links;
}

TEST(PeerLinksTest, SingleSlowLinkRanksFirst) {
  auto links = Ring(8);
  links[{3, 4, 7}].busy = absl::Milliseconds(25);  // 2.5x slower
  PeerLinkRanking r = RankPeerLinks(links, {});
  ASSERT_EQ(r.links.size(), 8u);
  EXPECT_EQ(r.links[0].key.src, 3u);
  EXPECT_EQ(r.links[0].key.dst, 4u);
  EXPECT_NEAR(r.links[0].ratio, 2.5, 1e-9);
  EXPECT_TRUE(r.links[0].slow);
  EXPECT_FALSE(r.links[1].slow);
  EXPECT_NEAR(r.links[1].ratio, 1.0, 1e-9);
  ASSERT_EQ(r.Slow().size(), 1u);
  EXPECT_TRUE(r.endpoints.empty());  // Rank 3's link in and rank 4's link out are fine.
  EXPECT_EQ(r.groups_judged, 1);
}

TEST(PeerLinksTest, ASlowNicSlowsEveryLinkThroughItAndIsNamed) {
  auto links = Ring(6);
  links[{1, 2, 7}].busy = absl::Milliseconds(30);
  links[{2, 3, 7}].busy = absl::Milliseconds(30);
  PeerLinkRanking r = RankPeerLinks(links, {});
  EXPECT_EQ(r.Slow().size(), 2u);
  ASSERT_EQ(r.endpoints.size(), 1u);
  EXPECT_EQ(r.endpoints[0], 2u);
}

TEST(PeerLinksTest, HealthyNoiseIsNotSlow) {
  auto links = Ring(8);
  const double noise[] = {10.0, 10.4, 9.8, 10.2, 10.5, 9.9, 10.1, 10.3};
  int i = 0;
  for (auto& [k, t] : links) t.busy = absl::Milliseconds(noise[i++]);
  EXPECT_TRUE(RankPeerLinks(links, {}).Slow().empty());
}

TEST(PeerLinksTest, GroupsAreComparedApartAndSmallOnesNotJudged) {
  auto links = Ring(4);
  // A PP pair: much slower per byte than the DP ring (smaller messages), alone in its group.
  PeerLinkTotals& pp = links[{0, 9, 8}];
  pp.group = "COMM_KIND_PP";
  pp.bytes = 1 << 20;
  pp.busy = absl::Milliseconds(5);
  // Too few bytes to time.
  PeerLinkTotals& tiny = links[{1, 9, 8}];
  tiny.group = "COMM_KIND_PP";
  tiny.bytes = 100;
  tiny.busy = absl::Milliseconds(1);
  PeerLinkRanking r = RankPeerLinks(links, {});
  EXPECT_EQ(r.links.size(), 4u);
  EXPECT_EQ(r.links_unjudged, 2);
  EXPECT_TRUE(r.Slow().empty());
}

TEST(PeerLinksTest, OptionsAreValidated) {
  PeerLinkOptions o;
  EXPECT_TRUE(o.Validate().ok());
  o.slow_ratio = 0;
  EXPECT_NE(o.Validate().message().find("slow_ratio"), absl::string_view::npos);
  o = {};
  o.min_links = 1;
  EXPECT_NE(o.Validate().message().find("min_links"), absl::string_view::npos);
}

}  // namespace
}  // namespace falcon::analysis::detect
