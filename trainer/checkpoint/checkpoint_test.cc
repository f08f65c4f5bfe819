#include "trainer/checkpoint/checkpoint.h"

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace falcon::trainer::checkpoint {
namespace {

std::string TempDir(const std::string& name) {
  const char* base = std::getenv("TEST_TMPDIR");
  return std::string(base != nullptr ? base : "/tmp") + "/" + name;
}

TEST(CheckpointTest, ManifestRoundTrips) {
  CheckpointManifest m;
  m.iteration = 42;
  m.plan_version = 3;
  m.seed = 0xfedcba9876543210ULL;
  m.model.vocab_size = 76;
  m.model.num_blocks = 6;
  m.world = 8;
  m.dp = 4;
  m.pp = 2;
  m.micro_batches = 8;
  m.micro_batch_plan = {4, 2, 2, 0};
  m.excluded_ranks = {5};
  m.last_loss = 2.25;
  const std::string dir = TempDir("manifest/nested");
  ASSERT_TRUE(WriteManifest(dir, m).ok());
  absl::StatusOr<CheckpointManifest> back = ReadManifest(dir);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->iteration, 42);
  EXPECT_EQ(back->seed, m.seed);
  EXPECT_EQ(back->model.num_blocks, 6);
  EXPECT_EQ(back->model.hidden, m.model.hidden);
  EXPECT_EQ(back->micro_batch_plan, m.micro_batch_plan);
  EXPECT_EQ(back->excluded_ranks, m.excluded_ranks);
  EXPECT_EQ(back->last_loss, 2.25);
}

TEST(CheckpointTest, ManifestRecordsTheLayerSplit) {
  CheckpointManifest m;
  m.model.vocab_size = 10;
  m.model.num_blocks = 8;
  m.world = 4;
  m.dp = 2;
  m.pp = 2;
  m.micro_batches = 8;
  m.micro_batch_plan = {3, 5};
  m.layer_split = {{3, 5}, {4, 4}};
  const std::string dir = TempDir("split");
  ASSERT_TRUE(WriteManifest(dir, m).ok());
  absl::StatusOr<CheckpointManifest> back = ReadManifest(dir);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->layer_split, m.layer_split);

  // A manifest written before S2L has no split: even.
  nlohmann::json j;
  {
    std::ifstream in(dir + "/manifest.json");
    j = nlohmann::json::parse(in);
  }
  ASSERT_TRUE(j.contains("layer_split"));
  j.erase("layer_split");
  const std::string old_dir = TempDir("split-old");
  ASSERT_TRUE(MakeDirs(old_dir).ok());
  std::ofstream(old_dir + "/manifest.json") << j.dump();
  absl::StatusOr<CheckpointManifest> old = ReadManifest(old_dir);
  ASSERT_TRUE(old.ok()) << old.status();
  EXPECT_TRUE(old->layer_split.empty());

  // A split that does not fit the checkpoint's shape is damage.
  for (const std::vector<std::vector<int>>& bad : std::vector<std::vector<std::vector<int>>>{
           {{3, 5}}, {{3, 5}, {4, 3}}, {{8, 0}, {4, 4}}, {{2, 2, 4}, {4, 4}}}) {
    m.layer_split = bad;
    ASSERT_TRUE(WriteManifest(dir, m).ok());
    EXPECT_EQ(ReadManifest(dir).status().code(), absl::StatusCode::kDataLoss);
  }
}

TEST(CheckpointTest, MissingOrForeignManifest) {
  EXPECT_EQ(ReadManifest(TempDir("nothing-here")).status().code(), absl::StatusCode::kNotFound);
  const std::string dir = TempDir("foreign");
  ASSERT_TRUE(MakeDirs(dir).ok());
  std::ofstream(dir + "/manifest.json") << "{\"format\": \"something else\"}";
  EXPECT_EQ(ReadManifest(dir).status().code(), absl::StatusCode::kDataLoss);
}

TEST(CheckpointTest, LayerRoundTripsAndRejectsOtherShapes) {
  const std::string dir = TempDir("layers");
  std::vector<float> p = {1, 2, 3}, m = {4, 5, 6}, v = {7, 8, 9};
  ASSERT_TRUE(WriteLayer(dir, 2, 3, p.data(), m.data(), v.data()).ok());
  std::vector<float> p2(3), m2(3), v2(3);
  ASSERT_TRUE(ReadLayer(dir, 2, 3, p2.data(), m2.data(), v2.data()).ok());
  EXPECT_EQ(p2, p);
  EXPECT_EQ(m2, m);
  EXPECT_EQ(v2, v);
  std::vector<float> big(4);
  EXPECT_EQ(ReadLayer(dir, 2, 4, big.data(), big.data(), big.data()).code(),
            absl::StatusCode::kDataLoss);
  EXPECT_EQ(ReadLayer(dir, 5, 3, p2.data(), m2.data(), v2.data()).code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace falcon::trainer::checkpoint
