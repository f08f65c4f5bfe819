// Test double: a Sleeper that records what it was asked to spend instead of spending it.
// Thread-safe.
#ifndef FALCON_COLLECTIVE_FAULT_RECORDING_SLEEPER_H_
#define FALCON_COLLECTIVE_FAULT_RECORDING_SLEEPER_H_

#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "collective/fault/sleeper.h"

namespace falcon::collective::fault {

class RecordingSleeper : public Sleeper {
 public:
  void Spend(absl::Duration d) override {
    absl::MutexLock lock(&mu_);
    spent_.push_back(d);
  }
  std::vector<absl::Duration> spent() const {
    absl::MutexLock lock(&mu_);
    return spent_;
  }

 private:
  mutable absl::Mutex mu_;
  std::vector<absl::Duration> spent_ ABSL_GUARDED_BY(mu_);
};

}  // namespace falcon::collective::fault

#endif  // FALCON_COLLECTIVE_FAULT_RECORDING_SLEEPER_H_
