#include "common/comm_kind.h"

#include "absl/strings/ascii.h"
#include "absl/strings/strip.h"

namespace falcon::common {

std::string CommKindName(CommKind kind) {
  if (!::falcon::v1::CommKind_IsValid(kind)) return "invalid";
  absl::string_view name = ::falcon::v1::CommKind_Name(kind);
  absl::ConsumePrefix(&name, "COMM_KIND_");
  return absl::AsciiStrToLower(name);
}

}  // namespace falcon::common
