#include "common/version.h"

#include <string>

#include "absl/flags/usage_config.h"
#include "absl/strings/str_cat.h"

namespace falcon::common {

void InstallVersionFlag(const char* program) {
  absl::FlagsUsageConfig config;  // Only the fields set here change.
  const std::string line = absl::StrCat(program, " ", kFalconVersion, "\n");
  config.version_string = [line]() { return line; };
  absl::SetFlagsUsageConfig(config);
}

}  // namespace falcon::common
