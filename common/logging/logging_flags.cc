// The Abseil flag --v. Kept apart from glog's headers: glog declares its own fLI::FLAGS_v and a
// global `using` of it, which would collide with Abseil's global FLAGS_v in one file.
#include "absl/flags/flag.h"

ABSL_FLAG(int, v, 0,
          "log verbosity: VLOG(n) lines with n <= this are written to stderr (also -v N)");

namespace falcon::common::logging::logging_internal {

int VerbosityFlag() { return absl::GetFlag(FLAGS_v); }

}  // namespace falcon::common::logging::logging_internal
