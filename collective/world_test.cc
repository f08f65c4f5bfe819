#include "collective/world.h"

#include <cstdlib>

#include "collective/device_memory.h"
#include "gtest/gtest.h"

namespace falcon::collective {
namespace {

launch::RankEnv Env(int rank, int size) {
  launch::RankEnv e;
  e.rank = rank;
  e.world_size = size;
  e.dp = size;
  e.rendezvous_dir = std::string(std::getenv("TEST_TMPDIR")) + "/world_store";
  return e;
}

TEST(WorldTest, ParsesBackends) {
  EXPECT_EQ(ParseBackend("gloo").value(), Backend::kGloo);
  EXPECT_EQ(ParseBackend("nccl").value(), Backend::kNccl);
  EXPECT_EQ(ParseBackend("mpi").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(WorldTest, RuntimeTakesThisRanksLinkFaults) {
  launch::RankEnv e = Env(1, 2);
  e.faults = "link:src=1,dst=0,delay_ms=3;link:src=0,dst=1,delay_ms=9";
  auto runtime = MakeRuntime(e);
  ASSERT_TRUE(runtime.ok()) << runtime.status();
  ASSERT_NE((*runtime)->link_shaper(), nullptr);
  EXPECT_EQ((*runtime)->link_shaper()->DelayFor(1, 0, 0, 0), absl::Milliseconds(3));
  EXPECT_EQ((*runtime)->link_shaper()->DelayFor(0, 1, 0, 0), absl::ZeroDuration());
  e.faults = "link:src=1";
  EXPECT_EQ(MakeRuntime(e).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MakeRuntime(Env(0, 1)).value()->link_shaper(), nullptr);
}

TEST(WorldTest, SingleRankGlooWorldFromEnv) {
  launch::RankEnv e = Env(0, 1);
  auto runtime = MakeRuntime(e);
  ASSERT_TRUE(runtime.ok());
  auto options = WorldOptionsFrom(e);
  ASSERT_TRUE(options.ok());
  auto world = CreateWorld(*options, *runtime);
  ASSERT_TRUE(world.ok()) << world.status();
  EXPECT_EQ((*world)->size(), 1);
  EXPECT_EQ((*world)->info().backend, "gloo");
  EXPECT_EQ((*world)->memory_kind(), MemoryKind::kHost);
  float v[3] = {1, 2, 3};
  ASSERT_TRUE((*world)->AllReduce(HostBuffer(v, 3), HostBuffer(v, 3), ReduceOp::kSum).ok());
  EXPECT_EQ(v[2], 3.0f);
}

TEST(WorldTest, NcclNeedsTheCudaVariantAndAGpu) {
  launch::RankEnv e = Env(0, 1);
  e.backend = "nccl";
  e.rendezvous_dir += "_nccl";
  auto runtime = MakeRuntime(e);
  ASSERT_TRUE(runtime.ok());
  auto world = CreateWorld(WorldOptionsFrom(e).value(), *runtime);
  if (!NcclCompiledIn()) {
    EXPECT_EQ(world.status().code(), absl::StatusCode::kUnimplemented) << world.status();
  } else if (!DeviceCount().ok()) {
    EXPECT_EQ(world.status().code(), absl::StatusCode::kFailedPrecondition) << world.status();
  } else {
    ASSERT_TRUE(world.ok()) << world.status();  // A GPU: a one-rank NCCL world works.
    EXPECT_EQ((*world)->memory_kind(), MemoryKind::kDevice);
    EXPECT_TRUE((*world)->Barrier().ok());
  }
}

}  // namespace
}  // namespace falcon::collective
