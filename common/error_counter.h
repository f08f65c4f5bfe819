// The seam through which a module reports an error it handled by logging and going on (a store
// write that failed after the in-memory state changed, a record for an event that has ended).
// Each daemon's metrics implement it as the counter falcon_<daemon>_errors_total{where}; `where`
// is a short stable snake_case site name ("orchestrator_record_action"), never free text.
// Implementations are thread-safe. NullErrorCounter discards counts (tests, offline tools).
#ifndef FALCON_COMMON_ERROR_COUNTER_H_
#define FALCON_COMMON_ERROR_COUNTER_H_

#include "absl/strings/string_view.h"

namespace falcon::common {

class ErrorCounter {
 public:
  virtual ~ErrorCounter() = default;
  virtual void CountError(absl::string_view where) = 0;
};

class NullErrorCounter final : public ErrorCounter {
 public:
  void CountError(absl::string_view) override {}
};

}  // namespace falcon::common

#endif  // FALCON_COMMON_ERROR_COUNTER_H_
