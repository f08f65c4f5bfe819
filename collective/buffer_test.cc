#include "collective/buffer.h"

#include <cstdint>

#include "collective/device_memory.h"
#include "gtest/gtest.h"

namespace falcon::collective {
namespace {

TEST(OwnedBufferTest, HostRoundTripSliceAndMove) {
  auto b = OwnedBuffer::Allocate(MemoryKind::kHost, DataType::kInt32, 5);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b->view().data) % 64, 0u);
  ASSERT_TRUE(b->Upload(std::vector<int32_t>{1, 2, 3, 4, 5}).ok());
  const Buffer s = b->Slice(2, 3);
  EXPECT_EQ(static_cast<int32_t*>(s.data)[0], 3);
  EXPECT_EQ(s.count, 3u);
  OwnedBuffer moved = std::move(*b);
  EXPECT_EQ(b->view().data, nullptr);
  auto back = moved.Download<int32_t>();
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, (std::vector<int32_t>{1, 2, 3, 4, 5}));
}

TEST(OwnedBufferTest, TypeAndSizeMismatchesAreErrors) {
  auto b = OwnedBuffer::Allocate(MemoryKind::kHost, DataType::kFloat32, 2);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->Upload(std::vector<float>{1}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(b->Upload(std::vector<double>{1, 2}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(b->Download<int32_t>().status().code(), absl::StatusCode::kInvalidArgument);
  float x[3];
  EXPECT_EQ(b->CopyFromHost(x, 8, 4).code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(b->CopyToHost(x, 12).code(), absl::StatusCode::kOutOfRange);
}

TEST(OwnedBufferTest, EmptyBufferIsFine) {
  auto b = OwnedBuffer::Allocate(MemoryKind::kHost, DataType::kUint8, 0);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->view().count, 0u);
  EXPECT_TRUE(b->Download<uint8_t>().ok());
}

TEST(OwnedBufferTest, DeviceMemoryNeedsCudaAndAGpu) {
  auto b = OwnedBuffer::Allocate(MemoryKind::kDevice, DataType::kFloat32, 16);
  if (!DeviceCount().ok()) {
    // No CUDA in this build, or no usable GPU here: a clear error, never a crash.
    EXPECT_FALSE(b.ok());
    EXPECT_EQ(b.status().code(), absl::StatusCode::kFailedPrecondition) << b.status();
    return;
  }
  ASSERT_TRUE(b.ok()) << b.status();
  std::vector<float> v(16, 2.5f);
  ASSERT_TRUE(b->Upload(v).ok());
  auto back = b->Download<float>();
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, v);
}

}  // namespace
}  // namespace falcon::collective
