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

namespace falcon::proto {

struct StartedServer {
  std::unique_ptr<grpc::Server> server;
  int port = 0;  // Bound TCP port; 0 for unix-socket addresses.
};

// Starts a server on `address` ("127.0.0.1:0" picks a free port; "unix:/path" for a unix socket)
// serving `services`, with gRPC server reflection enabled. Insecure credentials (loopback and
// node-local sockets; put TLS in front for anything else).
// The port is bound exclusively (no SO_REUSEPORT): a port already in use is an error.
// Errors: kInvalidArgument for a TCP address that common::ParseHostPort refuses (a port missing
// or outside [0, 65535], a malformed host);
// kUnavailable when the address cannot be bound (in use, no such interface).
absl::StatusOr<StartedServer> StartGrpcServer(const std::string& address,
                                              const std::vector<grpc::Service*>& services);

grpc::Status ToGrpcStatus(const absl::Status& status);
absl::Status FromGrpcStatus(const grpc::Status& status);

}  // namespace falcon::proto

#endif  // FALCON_PROTO_GRPC_UTIL_H_
