// gRPC plumbing shared by every Falcon server and client: starting a server with reflection on,
// and converting between absl::Status and grpc::Status (codes map one-to-one).
#ifndef FALCON_PROTO_GRPC_UTIL_H_
#define FALCON_PROTO_GRPC_UTIL_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace falcon::proto {

struct StartedServer {
  std::unique_ptr<grpc::Server> server;
  int port = 0;  // Bound TCP port; 0 for unix-socket addresses.
};

// HTTP/2 keepalive of a server's connections: the server pings a connection every `time` and
// closes it (cancelling its streams) when a ping is not answered within `timeout`, so a peer that
// stopped (a hung or stopped process, a dead host, a cut network) does not hold its streams
// forever. Each in (0, 24 h]; time zero = no keepalive pings (gRPC's default).
struct GrpcKeepalive {
  absl::Duration time = absl::ZeroDuration();
  absl::Duration timeout = absl::Seconds(20);
};

// Starts a server on `address` ("127.0.0.1:0" picks a free port; "unix:/path" for a unix socket)
// serving `services`, with gRPC server reflection enabled, with `credentials` (null: insecure,
// for node-local unix sockets and the plaintext demo; proto/grpc_tls.h makes TLS ones).
// The port is bound exclusively (no SO_REUSEPORT): a port already in use is an error.
// `keepalive` (see above) applies to every connection.
// Errors: kInvalidArgument for a TCP address that common::ParseHostPort refuses (a port missing
// or outside [0, 65535], a malformed host), or keepalive durations out of range;
// kUnavailable when the address cannot be bound (in use, no such interface).
absl::StatusOr<StartedServer> StartGrpcServer(
    const std::string& address, const std::vector<grpc::Service*>& services,
    const GrpcKeepalive& keepalive = GrpcKeepalive(),
    std::shared_ptr<grpc::ServerCredentials> credentials = nullptr);

grpc::Status ToGrpcStatus(const absl::Status& status);
absl::Status FromGrpcStatus(const grpc::Status& status);

}  // namespace falcon::proto

#endif  // FALCON_PROTO_GRPC_UTIL_H_
