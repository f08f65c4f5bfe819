// Test double: an OpObserver that keeps every event and communicator it is told about.
// Thread-safe. (Not allocation-free: tests only.)
#ifndef FALCON_COLLECTIVE_TESTING_RECORDING_OBSERVER_H_
#define FALCON_COLLECTIVE_TESTING_RECORDING_OBSERVER_H_

#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "collective/observer.h"

namespace falcon::collective::testing {

class RecordingObserver : public OpObserver {
 public:
  void OnOp(const OpEvent& event) noexcept override {
    absl::MutexLock lock(&mu_);
    events_.push_back(event);
  }
  void OnCommCreated(const CommInfo& info) noexcept override {
    absl::MutexLock lock(&mu_);
    comms_.push_back(info);
  }
  std::vector<OpEvent> events() const {
    absl::MutexLock lock(&mu_);
    return events_;
  }
  std::vector<CommInfo> comms() const {
    absl::MutexLock lock(&mu_);
    return comms_;
  }
  void Clear() {
    absl::MutexLock lock(&mu_);
    events_.clear();
  }

 private:
  mutable absl::Mutex mu_;
  std::vector<OpEvent> events_ ABSL_GUARDED_BY(mu_);
  std::vector<CommInfo> comms_ ABSL_GUARDED_BY(mu_);
};

}  // namespace falcon::collective::testing

#endif  // FALCON_COLLECTIVE_TESTING_RECORDING_OBSERVER_H_
