#include "cluster/netns_subnet.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace falcon::cluster {
namespace {

using ::testing::HasSubstr;

// As `ip -j -4 addr show` / `ip -j -4 route show table all` print them (iproute2 6.1, trimmed).
constexpr char kAddrs[] =
    R"([{"ifindex":1,"ifname":"lo","addr_info":[{"family":"inet","local":"127.0.0.1",)"
    R"("prefixlen":8}]},{"ifindex":4,"ifname":"eth0","addr_info":[{"family":"inet",)"
    R"("local":"10.77.0.17","prefixlen":24}]},{"ifindex":5,"ifname":"br9","addr_info":[]}])";
constexpr char kRoutes[] =
    R"([{"dst":"default","gateway":"192.0.2.1","dev":"eth0","flags":[]},)"
    R"({"dst":"10.77.1.0/24","dev":"eth0","flags":[]},)"
    R"({"type":"local","dst":"10.77.2.5","dev":"lo","table":"local","flags":[]},)"
    R"({"type":"broadcast","dst":"127.255.255.255","dev":"lo","table":"local","flags":[]}])";

uint32_t Ip(uint32_t a, uint32_t b, uint32_t c, uint32_t d) {
  return (a << 24) | (b << 16) | (c << 8) | d;
}

TEST(NetnsSubnetTest, SkipsEveryAddressAndRouteInUse) {
  absl::StatusOr<std::vector<Ipv4Prefix>> used = PrefixesInUse(kAddrs, kRoutes);
  ASSERT_TRUE(used.ok()) << used.status();
  EXPECT_EQ(used->size(), 5u);  // Two addresses, three routes (not the default).
  absl::StatusOr<uint32_t> net = ChooseSubnet(*used);
  ASSERT_TRUE(net.ok()) << net.status();
  EXPECT_EQ(Ipv4ToString(*net), "10.77.3.0");
}

TEST(NetnsSubnetTest, AWideRouteCoversManyCandidates) {
  EXPECT_EQ(*ChooseSubnet({{Ip(10, 77, 0, 0), 16}}), Ip(10, 78, 0, 0));
  EXPECT_EQ(*ChooseSubnet({{Ip(10, 64, 0, 0), 11}, {Ip(10, 96, 0, 0), 24}}), Ip(10, 96, 1, 0));
  absl::StatusOr<uint32_t> none = ChooseSubnet({{Ip(10, 0, 0, 0), 8}});
  EXPECT_EQ(none.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(none.status().message(), HasSubstr("between 10.77.0.0 and 10.99.255.0"));
  EXPECT_EQ(*ChooseSubnet({}), kSubnetFirst);
}

TEST(NetnsSubnetTest, EmptyListingsAreNothingInUse) {
  absl::StatusOr<std::vector<Ipv4Prefix>> used = PrefixesInUse("", "[]");
  ASSERT_TRUE(used.ok()) << used.status();
  EXPECT_TRUE(used->empty());
}

TEST(NetnsSubnetTest, MalformedOutputIsNamed) {
  EXPECT_THAT(PrefixesInUse("{", "[]").status().message(), HasSubstr("`ip -j -4 addr show`"));
  EXPECT_THAT(PrefixesInUse("[]", R"([{"dst":"10.1.2/33"}])").status().message(),
              HasSubstr("`ip -j -4 route show table all`: '10.1.2/33' is not an IPv4 prefix"));
  EXPECT_THAT(PrefixesInUse(R"([{"addr_info":[{"local":"1.2.3.4"}]}])", "[]").status().message(),
              HasSubstr("address without local/prefixlen"));
}

TEST(NetnsSubnetTest, ParsesPrefixes) {
  absl::StatusOr<Ipv4Prefix> p = ParseIpv4Prefix("10.77.3.9/24", "x");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->address, Ip(10, 77, 3, 0));
  EXPECT_EQ(p->length, 24);
  EXPECT_EQ(ParseIpv4Prefix("1.2.3.4", "x")->length, 32);
  EXPECT_EQ(ParseIpv4Prefix("0.0.0.0/0", "x")->length, 0);
  for (const char* bad : {"", "1.2.3", "1.2.3.4/", "1.2.3.4/x", "1.2.3.4/-1", "::1/128"}) {
    EXPECT_FALSE(ParseIpv4Prefix(bad, "x").ok()) << bad;
  }
}

}  // namespace
}  // namespace falcon::cluster
