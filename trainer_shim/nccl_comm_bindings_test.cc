#include "trainer_shim/nccl_comm_bindings.h"

#include "gtest/gtest.h"

namespace falcon::trainer_shim {
namespace {

TEST(NcclCommBindingsTest, BindsOldestOpenHandleOfTheSameShape) {
  NcclCommBindings b;
  ASSERT_TRUE(b.Open(11, 4, 1).ok());
  ASSERT_TRUE(b.Open(12, 2, 0).ok());
  ASSERT_TRUE(b.Open(13, 4, 1).ok());
  EXPECT_FALSE(b.CommId(11).has_value());
  // The 2-rank comm is created second but bound first: shapes keep them apart.
  ASSERT_TRUE(b.Bind(2, 0, 200, {6, 7}).ok());
  ASSERT_TRUE(b.Bind(4, 1, 100, {0, 2, 4, 6}).ok());
  ASSERT_TRUE(b.Bind(4, 1, 101, {1, 3, 5, 7}).ok());
  EXPECT_EQ(b.CommId(11), 100u);
  EXPECT_EQ(b.CommId(12), 200u);
  EXPECT_EQ(b.CommId(13), 101u);
  EXPECT_EQ(b.Resolve(12, 1, "t")->global_rank, 7);
  EXPECT_FALSE(b.Resolve(12, 2, "t").ok());
  EXPECT_FALSE(b.Resolve(12, -2, "t").ok());
  auto resolved = b.Resolve(13, 2, "transfer");
  ASSERT_TRUE(resolved.ok());
  EXPECT_EQ(resolved->comm_id, 101u);
  EXPECT_EQ(resolved->global_rank, 5);
  EXPECT_EQ(b.Resolve(13, -1, "op")->global_rank, -1);
  absl::Status outside = b.Resolve(13, 4, "transfer").status();
  EXPECT_EQ(outside.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(outside.message().find("transfer.peer"), absl::string_view::npos) << outside;
  EXPECT_NE(b.Resolve(99, 0, "op").status().message().find("op.nccl_comm"),
            absl::string_view::npos);
  // Nothing open of that shape any more: no plugin handle to bind.
  EXPECT_EQ(b.Bind(4, 1, 102, {8, 9, 10, 11}).code(), absl::StatusCode::kFailedPrecondition);
}

TEST(NcclCommBindingsTest, RejectsBadInputNamingTheField) {
  NcclCommBindings b;
  EXPECT_EQ(b.Open(0, 2, 0).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(b.Open(1, 0, 0).code(), absl::StatusCode::kInvalidArgument);
  absl::Status s = b.Open(1, 2, 2);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("nccl_comm.rank"), absl::string_view::npos);
  ASSERT_TRUE(b.Open(1, 2, 0).ok());
  EXPECT_EQ(b.Open(1, 2, 0).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(b.Bind(2, 0, 0, {0, 1}).code(), absl::StatusCode::kInvalidArgument);
  s = b.Bind(2, 0, 9, {0});
  EXPECT_NE(s.message().find("member_ranks"), absl::string_view::npos);
  EXPECT_EQ(b.Bind(2, 0, 9, {3, 3}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(b.CommId(1).has_value());  // Failed binds leave it open and unbound.
  EXPECT_TRUE(b.Bind(2, 0, 9, {3, 4}).ok());
}

TEST(NcclCommBindingsTest, CloseForgetsTheHandle) {
  NcclCommBindings b;
  ASSERT_TRUE(b.Open(5, 2, 1).ok());
  ASSERT_TRUE(b.Open(6, 2, 1).ok());
  ASSERT_TRUE(b.Close(5).ok());
  EXPECT_EQ(b.Close(5).code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(b.Bind(2, 1, 77, {0, 1}).ok());  // Binds 6: 5 is gone.
  EXPECT_EQ(b.CommId(6), 77u);
  EXPECT_EQ(b.open_handles(), 1u);
  b.CountUnbound();
  EXPECT_EQ(b.unbound(), 1u);
}

}  // namespace
}  // namespace falcon::trainer_shim
