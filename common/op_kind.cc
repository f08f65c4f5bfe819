#include "common/op_kind.h"

#include "absl/strings/ascii.h"
#include "absl/strings/strip.h"

namespace falcon::common {

std::string OpKindName(OpKind kind) {
  if (!::falcon::v1::OpKind_IsValid(kind)) return "invalid";
  absl::string_view name = ::falcon::v1::OpKind_Name(kind);
  absl::ConsumePrefix(&name, "OP_KIND_");
  return absl::AsciiStrToLower(name);
}

bool IsPeerTransfer(OpKind kind) {
  return kind == ::falcon::v1::OP_KIND_PEER_SEND || kind == ::falcon::v1::OP_KIND_PEER_RECV;
}

bool HasPeer(OpKind kind) {
  return kind == ::falcon::v1::OP_KIND_SEND || kind == ::falcon::v1::OP_KIND_RECV ||
         IsPeerTransfer(kind);
}

}  // namespace falcon::common
