#include "collective/launch/rank_env.h"

#include <map>
#include <string>

#include "gtest/gtest.h"

namespace falcon::collective::launch {
namespace {

absl::StatusOr<RankEnv> Parse(const std::map<std::string, std::string>& vars) {
  return ParseRankEnv([&vars](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  });
}

TEST(RankEnvTest, RoundTripsThroughVariables) {
  RankEnv e;
  e.rank = 5;
  e.world_size = 8;
  e.local_rank = 1;
  e.local_world_size = 4;
  e.node = "node1";
  e.node_index = 1;
  e.num_nodes = 2;
  e.rendezvous_dir = "/tmp/x";
  e.dp = 2;
  e.pp = 2;
  e.tp = 2;
  e.faults = "link:src=1,dst=2,delay_ms=5";
  e.backend = "nccl";
  e.comm_timeout = absl::Seconds(7);
  e.host_address = "10.77.3.2";
  std::map<std::string, std::string> vars;
  for (const auto& [k, v] : e.ToVariables()) vars[k] = v;
  auto back = Parse(vars);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->rank, 5);
  EXPECT_EQ(back->world_size, 8);
  EXPECT_EQ(back->local_rank, 1);
  EXPECT_EQ(back->local_world_size, 4);
  EXPECT_EQ(back->node, "node1");
  EXPECT_EQ(back->node_index, 1);
  EXPECT_EQ(back->num_nodes, 2);
  EXPECT_EQ(back->rendezvous_dir, "/tmp/x");
  EXPECT_EQ(back->dp * 100 + back->pp * 10 + back->tp, 222);
  EXPECT_EQ(back->faults, e.faults);
  EXPECT_EQ(back->backend, "nccl");
  EXPECT_EQ(back->comm_timeout, absl::Seconds(7));
  EXPECT_EQ(back->host_address, "10.77.3.2");
}

TEST(RankEnvTest, HostAddressMustBeIpv4) {
  auto e = Parse({{"FALCON_RANK", "0"},
                  {"FALCON_WORLD_SIZE", "1"},
                  {"FALCON_RENDEZVOUS", "/d"},
                  {"FALCON_HOST_ADDRESS", "node1.local"}});
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("FALCON_HOST_ADDRESS='node1.local'"), std::string::npos)
      << e.status();
}

TEST(RankEnvTest, MinimalEnvironmentGetsDefaults) {
  auto e = Parse({{"FALCON_RANK", "1"}, {"FALCON_WORLD_SIZE", "3"}, {"FALCON_RENDEZVOUS", "/d"}});
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->dp, 3);
  EXPECT_EQ(e->pp, 1);
  EXPECT_EQ(e->local_rank, 1);
  EXPECT_EQ(e->backend, "gloo");
  EXPECT_EQ(e->host_address, "127.0.0.1");
}

TEST(RankEnvTest, ErrorsNameTheVariable) {
  EXPECT_EQ(Parse({}).status().code(), absl::StatusCode::kFailedPrecondition);
  const std::map<std::string, std::string> base = {
      {"FALCON_RANK", "0"}, {"FALCON_WORLD_SIZE", "4"}, {"FALCON_RENDEZVOUS", "/d"}};
  struct Case {
    const char* var;
    const char* value;
  } cases[] = {{"FALCON_RANK", "4"},       {"FALCON_RANK", "x"},      {"FALCON_WORLD_SIZE", "0"},
               {"FALCON_DP", "3"},         {"FALCON_BACKEND", "mpi"}, {"FALCON_RENDEZVOUS", ""},
               {"FALCON_LOCAL_RANK", "-1"}};
  for (const Case& c : cases) {
    auto vars = base;
    vars[c.var] = c.value;
    auto e = Parse(vars);
    ASSERT_FALSE(e.ok()) << c.var << "=" << c.value;
    EXPECT_EQ(e.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(e.status().message().find(
                  c.var == std::string("FALCON_RANK") && c.value[0] == '4' ? "FALCON_RANK" : c.var),
              absl::string_view::npos)
        << e.status();
  }
}

}  // namespace
}  // namespace falcon::collective::launch
