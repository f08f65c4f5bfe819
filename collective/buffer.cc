#include "collective/buffer.h"

#include <cstring>
#include <new>

#include "collective/device_memory.h"

namespace falcon::collective {
namespace {

constexpr std::align_val_t kHostAlignment{64};

}  // namespace

absl::StatusOr<OwnedBuffer> OwnedBuffer::Allocate(MemoryKind memory, DataType dtype, size_t count) {
  OwnedBuffer b;
  b.view_.count = count;
  b.view_.dtype = dtype;
  b.view_.memory = memory;
  const size_t bytes = b.view_.bytes();
  if (bytes == 0) return b;
  if (memory == MemoryKind::kHost) {
    b.view_.data = ::operator new[](bytes, kHostAlignment, std::nothrow);
    if (b.view_.data == nullptr) {
      b.view_.count = 0;
      return absl::ResourceExhaustedError(absl::StrCat("cannot allocate ", bytes, " host bytes"));
    }
    return b;
  }
  auto ptr = DeviceAlloc(bytes);
  if (!ptr.ok()) {
    b.view_.count = 0;
    return ptr.status();
  }
  b.view_.data = *ptr;
  return b;
}

OwnedBuffer::OwnedBuffer(OwnedBuffer&& other) noexcept : view_(other.view_) {
  other.view_ = Buffer();
}

OwnedBuffer& OwnedBuffer::operator=(OwnedBuffer&& other) noexcept {
  if (this != &other) {
    Release();
    view_ = other.view_;
    other.view_ = Buffer();
  }
  return *this;
}

OwnedBuffer::~OwnedBuffer() { Release(); }

void OwnedBuffer::Release() {
  if (view_.data == nullptr) return;
  if (view_.memory == MemoryKind::kHost) {
    ::operator delete[](view_.data, kHostAlignment);
  } else {
    DeviceFree(view_.data);
  }
  view_.data = nullptr;
}

Buffer OwnedBuffer::Slice(size_t offset, size_t count) const {
  Buffer b = view_;
  b.data = view_.data == nullptr
               ? nullptr
               : static_cast<char*>(view_.data) + offset * DataTypeSize(view_.dtype);
  b.count = count;
  return b;
}

absl::Status OwnedBuffer::CopyFromHost(const void* src, size_t bytes, size_t offset_bytes) {
  if (offset_bytes + bytes > view_.bytes()) {
    return absl::OutOfRangeError(absl::StrCat("copy of ", bytes, " bytes at offset ", offset_bytes,
                                              " into a ", view_.bytes(), "-byte buffer"));
  }
  if (bytes == 0) return absl::OkStatus();
  char* dst = static_cast<char*>(view_.data) + offset_bytes;
  if (view_.memory == MemoryKind::kHost) {
    std::memcpy(dst, src, bytes);
    return absl::OkStatus();
  }
  return CopyHostToDevice(dst, src, bytes);
}

absl::Status OwnedBuffer::CopyToHost(void* dst, size_t bytes) const {
  if (bytes > view_.bytes()) {
    return absl::OutOfRangeError(
        absl::StrCat("copy of ", bytes, " bytes out of a ", view_.bytes(), "-byte buffer"));
  }
  if (bytes == 0) return absl::OkStatus();
  if (view_.memory == MemoryKind::kHost) {
    std::memcpy(dst, view_.data, bytes);
    return absl::OkStatus();
  }
  return CopyDeviceToHost(dst, view_.data, bytes);
}

}  // namespace falcon::collective
