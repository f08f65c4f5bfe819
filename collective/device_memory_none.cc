// CPU-only implementation of device_memory.h (--config=nocuda or no toolkit).
#include "collective/device_memory.h"

namespace falcon::collective {
namespace {

absl::Status NoCuda() {
  return absl::FailedPreconditionError("device memory: this build has no CUDA (--config=nocuda)");
}

}  // namespace

bool DeviceSupportCompiledIn() { return false; }
absl::StatusOr<int> DeviceCount() { return NoCuda(); }
absl::StatusOr<void*> DeviceAlloc(size_t) { return NoCuda(); }
void DeviceFree(void*) {}
absl::Status CopyHostToDevice(void*, const void*, size_t) { return NoCuda(); }
absl::Status CopyDeviceToHost(void*, const void*, size_t) { return NoCuda(); }

}  // namespace falcon::collective
