#include "common/comm_kind.h"

#include "gtest/gtest.h"

namespace falcon::common {
namespace {

TEST(CommKindTest, NamesComeFromTheProtoEnum) {
  EXPECT_EQ(CommKindName(CommKind::COMM_KIND_DP), "dp");
  EXPECT_EQ(CommKindName(CommKind::COMM_KIND_PP), "pp");
  EXPECT_EQ(CommKindName(CommKind::COMM_KIND_TP), "tp");
  EXPECT_EQ(CommKindName(CommKind::COMM_KIND_WORLD), "world");
  EXPECT_EQ(CommKindName(CommKind::COMM_KIND_UNKNOWN), "unknown");
  EXPECT_EQ(CommKindName(CommKind::COMM_KIND_UNSPECIFIED), "unspecified");
  EXPECT_EQ(CommKindName(static_cast<CommKind>(99)), "invalid");
}

}  // namespace
}  // namespace falcon::common
