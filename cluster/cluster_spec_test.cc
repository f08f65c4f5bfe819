#include "cluster/cluster_spec.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace falcon::cluster {
namespace {

using ::testing::HasSubstr;

ClusterSpec TwoNodes() {
  ClusterSpec s;
  s.kind = ClusterKind::kNetns;
  s.prefix = "fn1f";
  s.bridge = "fn1fbr";
  s.subnet = "10.77.3.0/24";
  s.controller_address = "10.77.3.254";
  s.nodes = {{"node0", "fn1f-node0", "10.77.3.1", "eth0", "fn1fh0"},
             {"node1", "fn1f-node1", "10.77.3.2", "eth0", "fn1fh1"}};
  return s;
}

TEST(ClusterSpecTest, RoundTripsThroughJsonAndFiles) {
  const ClusterSpec s = TwoNodes();
  auto back = ParseClusterSpec(ClusterSpecToJson(s), "cluster.json");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->kind, ClusterKind::kNetns);
  ASSERT_EQ(back->nodes.size(), 2u);
  EXPECT_EQ(back->nodes[1].host_veth, "fn1fh1");
  EXPECT_EQ((*back->Node("node1"))->address, "10.77.3.2");
  EXPECT_EQ((*back->NodeByAddress("10.77.3.1"))->name, "node0");
  EXPECT_THAT(std::string(back->Node("node9").status().message()), HasSubstr("node0, node1"));

  const std::string path = ::testing::TempDir() + "/cluster.json";
  ASSERT_TRUE(WriteClusterSpec(path, s).ok());
  auto read = ReadClusterSpec(path);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->controller_address, "10.77.3.254");
}

TEST(ClusterSpecTest, LoopbackNeedsNoNamespaceFields) {
  auto s = ParseClusterSpec(
      R"({"kind":"loopback","controller_address":"127.0.0.1",
          "nodes":[{"name":"node0","address":"127.0.0.1"},{"name":"node1","address":"127.0.0.1"}]})",
      "c");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->kind, ClusterKind::kLoopback);
  EXPECT_TRUE(s->nodes[0].netns.empty());
}

TEST(ClusterSpecTest, BadFieldsAreNamed) {
  struct Case {
    const char* json;
    const char* error;
  };
  const Case cases[] = {
      {R"([1])", "(document): must be a JSON object"},
      {R"({"kind":"vm","controller_address":"1.2.3.4","nodes":[]})", "kind: 'vm'"},
      {R"({"kind":"loopback","controller_address":"1.2.3","nodes":[{"name":"a","address":"1.2.3.4"}]})",
       "controller_address: '1.2.3' is not an IPv4"},
      {R"({"kind":"loopback","controller_address":"1.2.3.4","nodes":[]})", "nodes: must be"},
      {R"({"kind":"loopback","controller_address":"1.2.3.4","nodes":[{"name":"a","address":"x"}]})",
       "nodes[0].address: 'x'"},
      {R"({"kind":"loopback","controller_address":"1.2.3.4","nodes":[{"name":"a","address":"1.2.3.4"},{"name":"a","address":"1.2.3.4"}]})",
       "nodes[1].name: duplicate node 'a'"},
      {R"({"kind":"netns","prefix":"p","bridge":"b","subnet":"s","controller_address":"1.2.3.4","nodes":[{"name":"a","address":"1.2.3.4","iface":"eth0","host_veth":"v"}]})",
       "nodes[0].netns: missing"},
      {R"({"kind":"loopback","controller_address":7,"nodes":[]})",
       "controller_address: must be a string"},
  };
  for (const Case& c : cases) {
    auto s = ParseClusterSpec(c.json, "cluster.json");
    ASSERT_FALSE(s.ok()) << c.json;
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(s.status().message()), HasSubstr(c.error)) << c.json;
    EXPECT_THAT(std::string(s.status().message()), HasSubstr("cluster.json")) << c.json;
  }
}

TEST(RankTableTest, RoundTripsSortedAndChecksNodes) {
  RankTable t;
  t.generation = 2;
  t.ranks = {{1, "node1", 4243}, {0, "node0", 4242}};
  auto back = ParseRankTable(RankTableToJson(t), "ranks.json");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->generation, 2);
  ASSERT_EQ(back->ranks.size(), 2u);
  EXPECT_EQ(back->ranks[0].rank, 0);
  EXPECT_EQ((*back->Rank(1))->pid, 4243);
  EXPECT_THAT(std::string(back->Rank(5).status().message()), HasSubstr("world size 2"));
  EXPECT_TRUE(CheckRankTable(TwoNodes(), *back).ok());
  back->ranks[1].node = "node7";
  EXPECT_THAT(std::string(CheckRankTable(TwoNodes(), *back).message()),
              HasSubstr("rank 1 runs on node 'node7'"));
}

TEST(RankTableTest, BadEntriesAreNamed) {
  struct Case {
    const char* json;
    const char* error;
  };
  const Case cases[] = {
      {R"({"ranks":[]})", "generation: missing"},
      {R"({"generation":0,"ranks":{}})", "ranks: must be an array"},
      {R"({"generation":0,"ranks":[{"rank":0,"node":"a","pid":0}]})", "ranks[0].pid: 0 is outside"},
      {R"({"generation":0,"ranks":[{"rank":-1,"node":"a","pid":5}]})", "ranks[0].rank: -1"},
      {R"({"generation":0,"ranks":[{"rank":0,"node":"","pid":5}]})", "ranks[0].node: is empty"},
      {R"({"generation":0,"ranks":[{"rank":0,"node":"a","pid":5},{"rank":0,"node":"a","pid":6}]})",
       "ranks[1].rank: duplicate rank 0"},
      {R"({"generation":0,"ranks":[{"rank":0,"node":"a","pid":"5"}]})",
       "ranks[0].pid: must be an integer"},
  };
  for (const Case& c : cases) {
    auto t = ParseRankTable(c.json, "ranks.json");
    ASSERT_FALSE(t.ok()) << c.json;
    EXPECT_THAT(std::string(t.status().message()), HasSubstr(c.error)) << c.json;
  }
}

TEST(CommandInNodeTest, NetnsNodesRunInTheirNamespace) {
  const ClusterSpec s = TwoNodes();
  EXPECT_EQ(CommandInNode(s.nodes[1], {"falcon_agent", "--node=node1"}),
            (std::vector<std::string>{IpBinary(), "netns", "exec", "fn1f-node1", "falcon_agent",
                                      "--node=node1"}));
  NodeSpec loopback{"node0", "", "127.0.0.1", "", ""};
  EXPECT_EQ(CommandInNode(loopback, {"a", "b"}), (std::vector<std::string>{"a", "b"}));
}

}  // namespace
}  // namespace falcon::cluster
