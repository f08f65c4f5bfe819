#include "collective/types.h"

#include <string>

#include "gtest/gtest.h"
#include "proto/falcon/v1/common.pb.h"

namespace falcon::collective {
namespace {

TEST(TypesTest, CommKindMatchesWireEnum) {
  EXPECT_EQ(static_cast<int>(CommKind::kUnknown), falcon::v1::COMM_KIND_UNKNOWN);
  EXPECT_EQ(static_cast<int>(CommKind::kDp), falcon::v1::COMM_KIND_DP);
  EXPECT_EQ(static_cast<int>(CommKind::kPp), falcon::v1::COMM_KIND_PP);
  EXPECT_EQ(static_cast<int>(CommKind::kTp), falcon::v1::COMM_KIND_TP);
  EXPECT_EQ(static_cast<int>(CommKind::kWorld), falcon::v1::COMM_KIND_WORLD);
}

TEST(TypesTest, SizesNamesAndHostBuffer) {
  EXPECT_EQ(DataTypeSize(DataType::kUint8), 1u);
  EXPECT_EQ(DataTypeSize(DataType::kInt32), 4u);
  EXPECT_EQ(DataTypeSize(DataType::kFloat64), 8u);
  EXPECT_EQ(std::string(ReduceOpName(ReduceOp::kMax)), "max");
  EXPECT_EQ(std::string(CommKindName(CommKind::kTp)), "tp");
  double d[3];
  const Buffer b = HostBuffer(d, 3);
  EXPECT_EQ(b.data, d);
  EXPECT_EQ(b.dtype, DataType::kFloat64);
  EXPECT_EQ(b.memory, MemoryKind::kHost);
  EXPECT_EQ(b.bytes(), 24u);
}

}  // namespace
}  // namespace falcon::collective
