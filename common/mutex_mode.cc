#include "common/mutex_mode.h"

#include "absl/synchronization/mutex.h"

namespace falcon::common {

void SetReleaseMutexMode() {
#ifdef NDEBUG
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
#endif
}

}  // namespace falcon::common
