#include "common/logging/logging.h"

#include <glog/logging.h>

#include <atomic>

namespace falcon::common::logging {
namespace logging_internal {
int VerbosityFlag();  // logging_flags.cc
}  // namespace logging_internal

void InitLogging(const char* program) {
  FLAGS_logtostderr = true;
  FLAGS_v = logging_internal::VerbosityFlag();
  static std::atomic<bool> initialized{false};
  if (!initialized.exchange(true) && !google::IsGoogleLoggingInitialized()) {
    google::InitGoogleLogging(program);
  }
}

}  // namespace falcon::common::logging
