#include "trainer_shim/nccl/interposer_config.h"

#include <map>
#include <string>

#include "gtest/gtest.h"

namespace falcon::trainer_shim::nccl {
namespace {

InterposerConfig From(const std::map<std::string, std::string>& env) {
  return ConfigFromEnv([&env](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

TEST(InterposerConfigTest, DisabledWithoutAnAgentSocket) {
  EXPECT_FALSE(From({}).enabled);
  EXPECT_FALSE(From({{"FALCON_AGENT_SOCKET", ""}}).enabled);
  EXPECT_TRUE(From({{"FALCON_AGENT_SOCKET", "/run/a.sock"}}).enabled);
  EXPECT_FALSE(
      From({{"FALCON_AGENT_SOCKET", "/run/a.sock"}, {"FALCON_NCCL_DISABLE", "1"}}).enabled);
}

TEST(InterposerConfigTest, RankFromTheFirstLauncherVariablePresent) {
  InterposerConfig c = From({{"RANK", "3"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "1"}});
  EXPECT_EQ(c.rank, 3);
  EXPECT_EQ(c.world_size, 8);
  EXPECT_EQ(c.local_rank, 1u);
  c = From({{"FALCON_RANK", "5"}, {"RANK", "3"}, {"OMPI_COMM_WORLD_SIZE", "6"}});
  EXPECT_EQ(c.rank, 5);
  EXPECT_EQ(c.world_size, 6);
  c = From({{"SLURM_PROCID", "2"}, {"SLURM_NTASKS", "4"}});
  EXPECT_EQ(c.rank, 2);
}

TEST(InterposerConfigTest, InconsistentRankMeansLearnFromTheFirstComm) {
  EXPECT_EQ(From({{"RANK", "8"}, {"WORLD_SIZE", "8"}}).rank, -1);
  EXPECT_EQ(From({{"RANK", "x"}, {"WORLD_SIZE", "8"}}).rank, -1);
  EXPECT_EQ(From({{"RANK", "1"}}).world_size, -1);
}

TEST(InterposerConfigTest, FlagsAndNumbers) {
  InterposerConfig c = From({{"FALCON_PROFILING", "1"},
                             {"FALCON_NCCL_MEMBERSHIP", "0"},
                             {"FALCON_NCCL_EVENT_POOL", "64"},
                             {"FALCON_JOB", "llm.run-1"},
                             {"FALCON_EPOCH", "4"}});
  EXPECT_TRUE(c.profiling);
  EXPECT_FALSE(c.exchange_membership);
  EXPECT_EQ(c.event_pool, 64u);
  EXPECT_EQ(c.job, "llm.run-1");
  EXPECT_EQ(c.epoch, 4u);
  InterposerConfig d = From({{"FALCON_NCCL_EVENT_POOL", "-3"}, {"FALCON_PROFILING", "0"}});
  EXPECT_EQ(d.event_pool, 1024u);
  EXPECT_FALSE(d.profiling);
  EXPECT_TRUE(d.exchange_membership);
  // The words falcon.env reads the same way (docs/pytorch.md#gpu-jobs).
  for (const char* on : {"1", "true", "YES", "on"}) {
    EXPECT_TRUE(From({{"FALCON_PROFILING", on}}).profiling) << on;
  }
  for (const char* off : {"0", "false", "No", "off", "OFF"}) {
    EXPECT_FALSE(From({{"FALCON_PROFILING", off}}).profiling) << off;
  }
}

TEST(InterposerConfigTest, OpTimingByInterposerUnlessPluginIsAsked) {
  EXPECT_EQ(From({}).op_timing, OpTiming::kInterposer);
  EXPECT_EQ(From({{"FALCON_NCCL_OP_TIMING", "interposer"}}).op_timing, OpTiming::kInterposer);
  EXPECT_EQ(From({{"FALCON_NCCL_OP_TIMING", "bogus"}}).op_timing, OpTiming::kInterposer);
  EXPECT_EQ(From({{"FALCON_NCCL_OP_TIMING", "plugin"}}).op_timing, OpTiming::kPlugin);
  EXPECT_EQ(From({{"FALCON_NCCL_OP_TIMING", "Plugin"}}).op_timing, OpTiming::kPlugin);
}

}  // namespace
}  // namespace falcon::trainer_shim::nccl
