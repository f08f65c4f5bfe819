#include "collective/ring/host_reduce.h"

#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

namespace falcon::collective::ring {
namespace {

TEST(HostReduceTest, EveryOpOnFloats) {
  std::vector<float> acc = {1, -2, 3.5f};
  const std::vector<float> in = {4, 5, -1};
  std::vector<float> a = acc;
  ReduceInto(DataType::kFloat32, ReduceOp::kSum, a.data(), in.data(), 3);
  EXPECT_EQ(a, (std::vector<float>{5, 3, 2.5f}));
  a = acc;
  ReduceInto(DataType::kFloat32, ReduceOp::kProd, a.data(), in.data(), 3);
  EXPECT_EQ(a, (std::vector<float>{4, -10, -3.5f}));
  a = acc;
  ReduceInto(DataType::kFloat32, ReduceOp::kMin, a.data(), in.data(), 3);
  EXPECT_EQ(a, (std::vector<float>{1, -2, -1}));
  a = acc;
  ReduceInto(DataType::kFloat32, ReduceOp::kMax, a.data(), in.data(), 3);
  EXPECT_EQ(a, (std::vector<float>{4, 5, 3.5f}));
}

TEST(HostReduceTest, IntegerTypesAndCountLimit) {
  std::vector<int64_t> a = {1LL << 40, 7, 9};
  const std::vector<int64_t> b = {1LL << 40, 3, 100};
  ReduceInto(DataType::kInt64, ReduceOp::kSum, a.data(), b.data(), 2);  // Third untouched.
  EXPECT_EQ(a, (std::vector<int64_t>{1LL << 41, 10, 9}));
  std::vector<int32_t> c = {-5, 6};
  const std::vector<int32_t> d = {2, 2};
  ReduceInto(DataType::kInt32, ReduceOp::kMax, c.data(), d.data(), 2);
  EXPECT_EQ(c, (std::vector<int32_t>{2, 6}));
  std::vector<uint8_t> e = {200, 1};
  const std::vector<uint8_t> f = {100, 2};
  ReduceInto(DataType::kUint8, ReduceOp::kSum, e.data(), f.data(), 2);
  EXPECT_EQ(e, (std::vector<uint8_t>{44, 3}));  // Wraps like NCCL's uint8 sum.
  std::vector<double> g = {0.5};
  const std::vector<double> h = {0.25};
  ReduceInto(DataType::kFloat64, ReduceOp::kProd, g.data(), h.data(), 1);
  EXPECT_DOUBLE_EQ(g[0], 0.125);
}

}  // namespace
}  // namespace falcon::collective::ring
