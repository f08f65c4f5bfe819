// HOST:PORT addresses as Falcon's binaries take them (--controller, --listen, --metrics_listen),
// checked in one place so that every binary accepts and refuses the same addresses: gRPC and the
// metrics server would otherwise wrap a port above 65535 onto another port or fail later with an
// unclear message.
//
// Grammar: HOST ":" PORT, where HOST is a DNS name or IPv4 address (letters, digits, '.', '-',
// '_') or an IPv6 address in brackets ("[::1]"), and PORT is decimal digits in [1, 65535] (or
// [0, 65535] with PortZero::kAnyFree, where 0 lets the system pick a free port).
//
// Errors: kInvalidArgument whose message is "FIELD: 'ADDRESS' ..." naming what is wrong (no
// colon, no host, a bad host character, an unterminated [IPv6] host, the port and its range);
// with an empty `field` the message starts at the quoted address.
#ifndef FALCON_COMMON_HOST_PORT_H_
#define FALCON_COMMON_HOST_PORT_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace falcon::common {

enum class PortZero {
  kRefused,  // A peer's address (--controller): port in [1, 65535].
  kAnyFree,  // A listen address: port 0 picks a free one, [0, 65535].
};

struct HostPort {
  std::string host;  // Without the brackets of an IPv6 address.
  int port = 0;
};

absl::StatusOr<HostPort> ParseHostPort(absl::string_view address, absl::string_view field,
                                       PortZero zero);

}  // namespace falcon::common

#endif  // FALCON_COMMON_HOST_PORT_H_
