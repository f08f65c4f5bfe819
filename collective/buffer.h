// OwnedBuffer: memory for communicator ops on host or device, so trainer code is the same for
// both backends: allocate with comm.memory_kind(), fill with Upload, run ops on view(), read
// back with Download.
//
//   auto grad = OwnedBuffer::Allocate(comm->memory_kind(), DataType::kFloat32, n);
//   grad->Upload(host_values);
//   comm->AllReduce(grad->view(), grad->view(), ReduceOp::kSum);
//   auto summed = grad->Download<float>();
//
// Move-only; frees its memory on destruction. Thread-compatible.
#ifndef FALCON_COLLECTIVE_BUFFER_H_
#define FALCON_COLLECTIVE_BUFFER_H_

#include <cstddef>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "collective/types.h"

namespace falcon::collective {

class OwnedBuffer {
 public:
  // `count` elements of `dtype` in `memory` (host: 64-byte aligned; device: cudaMalloc on the
  // current device). count 0 gives an empty buffer. kFailedPrecondition for device memory in a
  // build or on a machine without CUDA; kResourceExhausted when allocation fails.
  static absl::StatusOr<OwnedBuffer> Allocate(MemoryKind memory, DataType dtype, size_t count);

  OwnedBuffer() = default;
  OwnedBuffer(OwnedBuffer&& other) noexcept;
  OwnedBuffer& operator=(OwnedBuffer&& other) noexcept;
  OwnedBuffer(const OwnedBuffer&) = delete;
  OwnedBuffer& operator=(const OwnedBuffer&) = delete;
  ~OwnedBuffer();

  const Buffer& view() const { return view_; }
  // Elements [offset, offset + count) as a view. REQUIRES: offset + count <= view().count.
  Buffer Slice(size_t offset, size_t count) const;

  // Copies `bytes` from host memory into the buffer at `offset_bytes`. kOutOfRange past the end.
  absl::Status CopyFromHost(const void* src, size_t bytes, size_t offset_bytes = 0);
  // Copies the first `bytes` of the buffer to host memory. kOutOfRange past the end.
  absl::Status CopyToHost(void* dst, size_t bytes) const;

  template <typename T>
  absl::Status Upload(const std::vector<T>& values) {
    if (DataTypeOf<T>() != view_.dtype || values.size() != view_.count) {
      return absl::InvalidArgumentError(
          absl::StrCat("upload of ", values.size(), " x ", DataTypeName(DataTypeOf<T>()), " into ",
                       view_.count, " x ", DataTypeName(view_.dtype)));
    }
    return CopyFromHost(values.data(), values.size() * sizeof(T));
  }
  template <typename T>
  absl::StatusOr<std::vector<T>> Download() const {
    if (DataTypeOf<T>() != view_.dtype) {
      return absl::InvalidArgumentError(absl::StrCat("download of ", DataTypeName(view_.dtype),
                                                     " as ", DataTypeName(DataTypeOf<T>())));
    }
    std::vector<T> out(view_.count);
    if (auto s = CopyToHost(out.data(), out.size() * sizeof(T)); !s.ok()) return s;
    return out;
  }

 private:
  void Release();
  Buffer view_;
};

}  // namespace falcon::collective

#endif  // FALCON_COLLECTIVE_BUFFER_H_
