// Raw device memory calls behind one header: CUDA in builds with CUDA (default variant with a
// toolkit), kFailedPrecondition stubs in --config=nocuda builds. Thread-safe.
#ifndef FALCON_COLLECTIVE_DEVICE_MEMORY_H_
#define FALCON_COLLECTIVE_DEVICE_MEMORY_H_

#include <cstddef>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace falcon::collective {

// True when this build has CUDA compiled in (a GPU may still be absent).
bool DeviceSupportCompiledIn();
// Number of visible CUDA devices; kFailedPrecondition (with the CUDA error text) when none can
// be used, e.g. no driver.
absl::StatusOr<int> DeviceCount();
// Allocates `bytes` (> 0) on the current device. kResourceExhausted / kFailedPrecondition.
absl::StatusOr<void*> DeviceAlloc(size_t bytes);
void DeviceFree(void* ptr);
absl::Status CopyHostToDevice(void* dst, const void* src, size_t bytes);
absl::Status CopyDeviceToHost(void* dst, const void* src, size_t bytes);

}  // namespace falcon::collective

#endif  // FALCON_COLLECTIVE_DEVICE_MEMORY_H_
