#include "collective/ring/host_reduce.h"

#include <algorithm>
#include <cstdint>

namespace falcon::collective::ring {
namespace {

template <typename T>
void ReduceTyped(ReduceOp op, T* acc, const T* in, size_t n) {
  switch (op) {
    case ReduceOp::kSum:
      for (size_t i = 0; i < n; ++i) acc[i] = static_cast<T>(acc[i] + in[i]);
      return;
    case ReduceOp::kProd:
      for (size_t i = 0; i < n; ++i) acc[i] = static_cast<T>(acc[i] * in[i]);
      return;
    case ReduceOp::kMin:
      for (size_t i = 0; i < n; ++i) acc[i] = std::min(acc[i], in[i]);
      return;
    case ReduceOp::kMax:
      for (size_t i = 0; i < n; ++i) acc[i] = std::max(acc[i], in[i]);
      return;
  }
}

}  // namespace

void ReduceInto(DataType dtype, ReduceOp op, void* acc, const void* in, size_t count) {
  switch (dtype) {
    case DataType::kUint8:
      ReduceTyped(op, static_cast<uint8_t*>(acc), static_cast<const uint8_t*>(in), count);
      return;
    case DataType::kInt32:
      ReduceTyped(op, static_cast<int32_t*>(acc), static_cast<const int32_t*>(in), count);
      return;
    case DataType::kInt64:
      ReduceTyped(op, static_cast<int64_t*>(acc), static_cast<const int64_t*>(in), count);
      return;
    case DataType::kFloat32:
      ReduceTyped(op, static_cast<float*>(acc), static_cast<const float*>(in), count);
      return;
    case DataType::kFloat64:
      ReduceTyped(op, static_cast<double*>(acc), static_cast<const double*>(in), count);
      return;
  }
}

}  // namespace falcon::collective::ring
