// A minimal gRPC server-reflection client: lists a server's services. Used by tests to prove that
// every Falcon server has reflection on, and by `falconctl services`.
#ifndef FALCON_PROTO_REFLECTION_CLIENT_H_
#define FALCON_PROTO_REFLECTION_CLIENT_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace falcon::proto {

// Fully qualified names of the services `channel`'s server exposes, sorted.
// Errors: kUnavailable / kDeadlineExceeded when the server cannot be reached within `timeout`;
// kUnimplemented when it has no reflection service; kInternal on a malformed answer.
absl::StatusOr<std::vector<std::string>> ListServicesByReflection(
    const std::shared_ptr<grpc::Channel>& channel, absl::Duration timeout);

}  // namespace falcon::proto

#endif  // FALCON_PROTO_REFLECTION_CLIENT_H_
