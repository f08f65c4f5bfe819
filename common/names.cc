#include "common/names.h"

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace falcon::common {
namespace {

bool IsJobNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-';
}

absl::Status Bad(absl::string_view field, absl::string_view rule) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": must be ", rule));
}

}  // namespace

bool IsValidJobName(absl::string_view name) {
  if (name.empty() || name.size() > kMaxJobNameBytes) return false;
  for (char c : name) {
    if (!IsJobNameChar(c)) return false;
  }
  return true;
}

absl::Status ValidateJobName(absl::string_view name, absl::string_view field) {
  if (IsValidJobName(name)) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(field, ": '", absl::CHexEscape(name.substr(0, kMaxJobNameBytes + 1)),
                   "' is not ", kJobNameRule));
}

bool IsValidNodeName(absl::string_view name) {
  return !name.empty() && name.size() <= kMaxNodeNameBytes;
}

absl::Status ValidateNodeName(absl::string_view name, absl::string_view field) {
  return IsValidNodeName(name) ? absl::OkStatus() : Bad(field, "1 to 256 bytes");
}

bool IsValidAgentId(absl::string_view id) { return !id.empty() && id.size() <= kMaxAgentIdBytes; }

absl::Status ValidateAgentId(absl::string_view id, absl::string_view field) {
  return IsValidAgentId(id) ? absl::OkStatus() : Bad(field, "1 to 256 bytes");
}

}  // namespace falcon::common
