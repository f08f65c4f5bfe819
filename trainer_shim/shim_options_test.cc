#include "trainer_shim/shim_options.h"

#include "common/layer_split.h"
#include "gtest/gtest.h"

namespace falcon::trainer_shim {
namespace {

ShimOptions Good() {
  ShimOptions o;
  o.job = "llama-7b.run_2";
  o.rank = 3;
  o.world_size = 8;
  return o;
}

void ExpectBad(const ShimOptions& o, const std::string& field) {
  absl::Status s = o.Validate();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find(field), std::string::npos) << s;
}

TEST(ShimOptionsTest, AcceptsDefaults) { EXPECT_TRUE(Good().Validate().ok()); }

TEST(ShimOptionsTest, RejectsBadFieldsByName) {
  ShimOptions o = Good();
  o.job = "";
  ExpectBad(o, "options.job");
  o.job = "has space";
  ExpectBad(o, "options.job");
  o = Good();
  o.rank = 8;
  ExpectBad(o, "options.rank");
  o = Good();
  o.world_size = 0;
  ExpectBad(o, "options.world_size");
  o = Good();
  o.max_batch_records = 70000;
  ExpectBad(o, "options.max_batch_records");
  o = Good();
  o.max_buffered_records = 10;
  ExpectBad(o, "options.max_buffered_records");
  o = Good();
  o.ring_capacity = 1;
  ExpectBad(o, "options.ring_capacity");
  o = Good();
  o.flush_interval = absl::ZeroDuration();
  ExpectBad(o, "options.flush_interval");
  o = Good();
  o.reconnect_backoff.jitter = 2;
  ExpectBad(o, "options.reconnect_backoff.jitter");
  o = Good();
  o.agent_socket = "unix:";
  ExpectBad(o, "options.agent_socket");
}

TEST(ShimOptionsTest, PipelineShapeIsUnknownOrInRange) {
  ShimOptions o = Good();
  o.pp_size = 4;
  o.pipeline_blocks = 4;  // One block per stage.
  o.block_state_bytes = common::kMaxBlockStateBytes;
  EXPECT_TRUE(o.Validate().ok());
  o.pipeline_blocks = 4096;
  EXPECT_TRUE(o.Validate().ok());
  o.pipeline_blocks = 0;  // Unknown.
  o.block_state_bytes = 0;
  EXPECT_TRUE(o.Validate().ok());
  o.pipeline_blocks = 3;  // Fewer blocks than stages.
  ExpectBad(o, "options.pipeline_blocks: 3 is not 0 (unknown) or in [4 (pp_size), 4096]");
  o.pipeline_blocks = 4097;
  ExpectBad(o, "options.pipeline_blocks: 4097");
  o.pp_size = 0;  // Unknown PP: one block is enough.
  o.pipeline_blocks = 1;
  EXPECT_TRUE(o.Validate().ok());
  o.block_state_bytes = common::kMaxBlockStateBytes + 1;
  ExpectBad(o, "options.block_state_bytes: 1125899906842625 is above 2^50");
}

TEST(ShimOptionsTest, AgentTargetAcceptsBothSpellings) {
  ShimOptions o = Good();
  EXPECT_EQ(o.AgentTarget(), "");
  o.agent_socket = "/run/falcon/agent.sock";
  EXPECT_EQ(o.AgentTarget(), "unix:/run/falcon/agent.sock");
  o.agent_socket = "unix:/tmp/a.sock";
  EXPECT_EQ(o.AgentTarget(), "unix:/tmp/a.sock");
}

}  // namespace
}  // namespace falcon::trainer_shim
