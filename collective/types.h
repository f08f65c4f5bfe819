// Vocabulary shared by every collective backend: element types, reduction operators, memory
// kinds, op kinds and communicator kinds, and the non-owning Buffer view that ops take.
//
// OpKind is the wire contract's falcon.v1.OpKind (common/op_kind.h); CommKind uses the numbering
// of falcon.v1.CommKind (proto/falcon/v1/common.proto), so a shim converts it with a static_cast.
// Plain data only: thread-compatible.
#ifndef FALCON_COLLECTIVE_TYPES_H_
#define FALCON_COLLECTIVE_TYPES_H_

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "common/comm_kind.h"
#include "common/op_kind.h"

namespace falcon::collective {

// Element type of a buffer.
enum class DataType : uint8_t {
  kUint8 = 0,
  kInt32 = 1,
  kInt64 = 2,
  kFloat32 = 3,
  kFloat64 = 4,
};

// Size in bytes of one element of `type`.
constexpr size_t DataTypeSize(DataType type) {
  switch (type) {
    case DataType::kUint8:
      return 1;
    case DataType::kInt32:
    case DataType::kFloat32:
      return 4;
    case DataType::kInt64:
    case DataType::kFloat64:
      return 8;
  }
  return 0;
}

const char* DataTypeName(DataType type);

// The DataType of a C++ element type (compile error for unsupported types).
template <typename T>
constexpr DataType DataTypeOf() {
  if constexpr (std::is_same_v<T, uint8_t>) return DataType::kUint8;
  if constexpr (std::is_same_v<T, int32_t>) return DataType::kInt32;
  if constexpr (std::is_same_v<T, int64_t>) return DataType::kInt64;
  if constexpr (std::is_same_v<T, float>) return DataType::kFloat32;
  if constexpr (std::is_same_v<T, double>) return DataType::kFloat64;
  static_assert(std::is_same_v<T, uint8_t> || std::is_same_v<T, int32_t> ||
                    std::is_same_v<T, int64_t> || std::is_same_v<T, float> ||
                    std::is_same_v<T, double>,
                "unsupported element type");
  return DataType::kUint8;
}

// Element-wise reduction for AllReduce and ReduceScatter.
enum class ReduceOp : uint8_t { kSum = 0, kProd = 1, kMin = 2, kMax = 3 };

const char* ReduceOpName(ReduceOp op);

// Where a buffer lives. Gloo communicators take host memory, NCCL communicators device memory;
// Communicator::memory_kind() says which, and OwnedBuffer (buffer.h) allocates either.
enum class MemoryKind : uint8_t { kHost = 0, kDevice = 1 };

const char* MemoryKindName(MemoryKind kind);

// Operation kinds: the wire contract's falcon.v1.OpKind (common/op_kind.h).
using common::OpKind;

// Role hint of a communicator: the wire contract's falcon.v1.CommKind (common/comm_kind.h).
using common::CommKind;
using common::CommKindName;

// A non-owning view of `count` elements of `dtype` at `data`, in `memory`. Ops read and write
// through it; the caller keeps the memory alive for the duration of the op.
struct Buffer {
  void* data = nullptr;
  size_t count = 0;
  DataType dtype = DataType::kFloat32;
  MemoryKind memory = MemoryKind::kHost;

  size_t bytes() const { return count * DataTypeSize(dtype); }
};

// A host Buffer over `count` elements at `data`.
template <typename T>
Buffer HostBuffer(T* data, size_t count) {
  Buffer b;
  b.data = const_cast<std::remove_const_t<T>*>(data);
  b.count = count;
  b.dtype = DataTypeOf<std::remove_const_t<T>>();
  b.memory = MemoryKind::kHost;
  return b;
}

}  // namespace falcon::collective

#endif  // FALCON_COLLECTIVE_TYPES_H_
