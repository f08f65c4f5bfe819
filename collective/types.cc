#include "collective/types.h"

namespace falcon::collective {

const char* DataTypeName(DataType type) {
  switch (type) {
    case DataType::kUint8:
      return "uint8";
    case DataType::kInt32:
      return "int32";
    case DataType::kInt64:
      return "int64";
    case DataType::kFloat32:
      return "float32";
    case DataType::kFloat64:
      return "float64";
  }
  return "invalid";
}

const char* ReduceOpName(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return "sum";
    case ReduceOp::kProd:
      return "prod";
    case ReduceOp::kMin:
      return "min";
    case ReduceOp::kMax:
      return "max";
  }
  return "invalid";
}

const char* MemoryKindName(MemoryKind kind) {
  return kind == MemoryKind::kHost ? "host" : kind == MemoryKind::kDevice ? "device" : "invalid";
}

}  // namespace falcon::collective
