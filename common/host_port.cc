#include "common/host_port.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace falcon::common {
namespace {

bool IsNameChar(char c) { return absl::ascii_isalnum(c) || c == '.' || c == '-' || c == '_'; }

bool IsV6Char(char c) { return absl::ascii_isxdigit(c) || c == ':' || c == '.' || c == '%'; }

}  // namespace

absl::StatusOr<HostPort> ParseHostPort(absl::string_view address, absl::string_view field,
                                       PortZero zero) {
  const std::string quoted = absl::StrCat(field, field.empty() ? "" : ": ", "'", address, "'");
  auto bad = [&](absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat(quoted, what));
  };
  const size_t colon = address.rfind(':');
  if (colon == absl::string_view::npos) return bad(" is not HOST:PORT");
  absl::string_view host = address.substr(0, colon);
  const absl::string_view port = address.substr(colon + 1);
  const bool v6 = absl::ConsumePrefix(&host, "[");
  if (v6 && !absl::ConsumeSuffix(&host, "]")) return bad(": unterminated [IPv6] host");
  if (host.empty()) return bad(" has no host");
  if (v6 ? !std::all_of(host.begin(), host.end(), IsV6Char)
         : !std::all_of(host.begin(), host.end(), IsNameChar)) {
    return bad(v6 ? absl::StrCat(": host '", host, "' is not an IPv6 address")
                  : absl::StrCat(": host '", host,
                                 "' is not a DNS name, an IPv4 address or a [IPv6] address"));
  }
  const int min_port = zero == PortZero::kAnyFree ? 0 : 1;
  int p = -1;
  if (port.empty() || port.size() > 5 ||
      !std::all_of(port.begin(), port.end(), absl::ascii_isdigit) || !absl::SimpleAtoi(port, &p) ||
      p < min_port || p > 65535) {
    return bad(absl::StrCat(": port '", port, "' is not in [", min_port, ", 65535]",
                            zero == PortZero::kAnyFree ? " (0 = any free)" : ""));
  }
  return HostPort{std::string(host), p};
}

}  // namespace falcon::common
