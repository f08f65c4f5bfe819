#include "collective/types.h"

#include <string>

#include "gtest/gtest.h"
#include "proto/falcon/v1/common.pb.h"

namespace falcon::collective {
namespace {

TEST(TypesTest, SizesNamesAndHostBuffer) {
  EXPECT_EQ(DataTypeSize(DataType::kUint8), 1u);
  EXPECT_EQ(DataTypeSize(DataType::kInt32), 4u);
  EXPECT_EQ(DataTypeSize(DataType::kFloat64), 8u);
  EXPECT_EQ(std::string(ReduceOpName(ReduceOp::kMax)), "max");
  EXPECT_EQ(std::string(CommKindName(CommKind::COMM_KIND_TP)), "tp");
  double d[3];
  const Buffer b = HostBuffer(d, 3);
  EXPECT_EQ(b.data, d);
  EXPECT_EQ(b.dtype, DataType::kFloat64);
  EXPECT_EQ(b.memory, MemoryKind::kHost);
  EXPECT_EQ(b.bytes(), 24u);
}

}  // namespace
}  // namespace falcon::collective
