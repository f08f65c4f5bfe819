#include "common/op_kind.h"

#include "gtest/gtest.h"

namespace falcon::common {
namespace {

TEST(OpKindTest, NamesComeFromTheProtoEnum) {
  EXPECT_EQ(OpKindName(falcon::v1::OP_KIND_ALL_REDUCE), "all_reduce");
  EXPECT_EQ(OpKindName(falcon::v1::OP_KIND_REDUCE_SCATTER), "reduce_scatter");
  EXPECT_EQ(OpKindName(falcon::v1::OP_KIND_ALL_TO_ALL), "all_to_all");
  EXPECT_EQ(OpKindName(falcon::v1::OP_KIND_UNSPECIFIED), "unspecified");
  EXPECT_EQ(OpKindName(static_cast<OpKind>(99)), "invalid");
}

}  // namespace
TEST(OpKindTest, PeerKinds) {
  EXPECT_TRUE(HasPeer(falcon::v1::OP_KIND_SEND));
  EXPECT_TRUE(HasPeer(falcon::v1::OP_KIND_PEER_RECV));
  EXPECT_FALSE(HasPeer(falcon::v1::OP_KIND_ALL_REDUCE));
  EXPECT_TRUE(IsPeerTransfer(falcon::v1::OP_KIND_PEER_SEND));
  EXPECT_FALSE(IsPeerTransfer(falcon::v1::OP_KIND_SEND));
  EXPECT_EQ(OpKindName(falcon::v1::OP_KIND_PEER_SEND), "peer_send");
}

}  // namespace falcon::common
