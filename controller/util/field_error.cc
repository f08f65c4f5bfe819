#include "controller/util/field_error.h"

namespace falcon::controller {

bool IsValidJobName(absl::string_view job) {
  if (job.empty() || job.size() > 128) return false;
  for (char c : job) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

}  // namespace falcon::controller
