#include "cluster/netns_names.h"

#include <string>

#include "gtest/gtest.h"

namespace falcon::cluster {
namespace {

TEST(NetnsNamesTest, ShapesOfEveryName) {
  EXPECT_EQ(NetnsPrefix(0x3a7f, 0), "fn3a7fg");
  EXPECT_EQ(NetnsPrefix(0x3a7f, 19), "fn3a7fz");
  EXPECT_EQ(BridgeName("fn3a7fg"), "fn3a7fgbr");
  EXPECT_EQ(HostVethName("fn3a7fg", 12), "fn3a7fgh12");
  EXPECT_EQ(NetnsName("fn3a7fg", "node0"), "fn3a7fg-node0");
}

TEST(NetnsNamesTest, LinkNamesFitIfnamsizForAnyPidAndNodeCount) {
  // The longest pid Linux can have (pid_t is 32 bits; pid_max is at most 2^22) and the last node.
  for (pid_t pid : {1, 0x3a7f, 4194304, 0x7fffffff}) {
    const std::string p = NetnsPrefix(pid, kPrefixCounterLetters - 1);
    EXPECT_LE(BridgeName(p).size(), kMaxLinkNameBytes) << p;
    EXPECT_LE(HostVethName(p, kMaxNetnsNodes - 1).size(), kMaxLinkNameBytes) << p;
    std::optional<FalconNetName> v = ParseLinkName(HostVethName(p, kMaxNetnsNodes - 1));
    ASSERT_TRUE(v.has_value()) << p;
    EXPECT_EQ(v->pid, pid);
    EXPECT_EQ(v->prefix, p);
    EXPECT_EQ(v->kind, FalconNetName::Kind::kHostVeth);
  }
}

TEST(NetnsNamesTest, ParsesItsOwnNames) {
  std::optional<FalconNetName> b = ParseLinkName("fn3a7fgbr");
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->kind, FalconNetName::Kind::kBridge);
  EXPECT_EQ(b->pid, 0x3a7f);
  EXPECT_EQ(b->prefix, "fn3a7fg");
  std::optional<FalconNetName> n = ParseNetnsName("fn3a7fk-node.a_b-1");
  ASSERT_TRUE(n.has_value());
  EXPECT_EQ(n->kind, FalconNetName::Kind::kNetns);
  EXPECT_EQ(n->prefix, "fn3a7fk");
  EXPECT_EQ(PrefixCreatorPid("fn3a7fk"), 0x3a7f);
}

TEST(NetnsNamesTest, RefusesEverythingElse) {
  for (const char* name : {"", "eth0", "fn", "fng", "fn3a7f", "fn3a7fgbr0", "fn3a7fgh", "fn3a7fghx",
                           "fn03a7fgbr", "fn3A7Fgbr", "fn3a7fGbr", "fn123456789gbr",
                           "fn3a7fg-node0", "xfn3a7fgbr", "fn3a7fgbrr", "fn80000000gbr"}) {
    EXPECT_FALSE(ParseLinkName(name).has_value()) << name;
  }
  for (const char* name : {"", "fn3a7fg", "fn3a7fg-", "fn3a7fg-a/b", "fn3a7fg-..", "fn3a7f-node0",
                           "fn3a7fgbr", "cni-42", "fn3a7fg-node 0"}) {
    EXPECT_FALSE(ParseNetnsName(name).has_value()) << name;
  }
  for (const char* prefix : {"fn3a7fgx", "fn3a7f", "fn3a7fgbr"}) {
    EXPECT_FALSE(PrefixCreatorPid(prefix).has_value()) << prefix;
  }
}

TEST(NetnsNamesTest, NodeNamesForNamespaces) {
  EXPECT_TRUE(ValidateNetnsNodeName("node0", "f").ok());
  EXPECT_TRUE(ValidateNetnsNodeName(std::string(kMaxNetnsNodeNameBytes, 'a'), "f").ok());
  EXPECT_FALSE(ValidateNetnsNodeName(std::string(kMaxNetnsNodeNameBytes + 1, 'a'), "f").ok());
  for (const char* bad : {"", ".", "..", "a/b", "a b", "nöd"}) {
    absl::Status s = ValidateNetnsNodeName(bad, "options.nodes[0]");
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(s.message().substr(0, 18), "options.nodes[0]: ") << bad;
  }
}

}  // namespace
}  // namespace falcon::cluster
