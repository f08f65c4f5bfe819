#include "proto/grpc_util.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/host_port.h"

namespace falcon::proto {
namespace {

// "HOST:PORT" (common/host_port.h; gRPC itself would wrap a port above 65535 onto another one).
// "unix:" addresses are left to gRPC.
absl::Status CheckPort(const std::string& address) {
  if (absl::StartsWith(address, "unix:")) return absl::OkStatus();
  return common::ParseHostPort(address, "address", common::PortZero::kAnyFree).status();
}

}  // namespace

absl::StatusOr<StartedServer> StartGrpcServer(
    const std::string& address, const std::vector<grpc::Service*>& services,
    const GrpcKeepalive& keepalive, std::shared_ptr<grpc::ServerCredentials> credentials) {
  if (absl::Status s = CheckPort(address); !s.ok()) return s;
  const bool pings = keepalive.time != absl::ZeroDuration();
  if (pings) {
    for (const auto& [name, d] : {std::make_pair("keepalive time", keepalive.time),
                                  std::make_pair("keepalive timeout", keepalive.timeout)}) {
      if (d <= absl::ZeroDuration() || d > absl::Hours(24)) {
        return absl::InvalidArgumentError(
            absl::StrCat(name, ": ", absl::FormatDuration(d), " is outside (0, 24h]"));
      }
    }
  }
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  // No SO_REUSEPORT: a second server on a port in use must fail, not split the clients.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  StartedServer started;
  builder.AddListeningPort(address,
                           credentials != nullptr ? credentials : grpc::InsecureServerCredentials(),
                           &started.port);
  builder.SetMaxReceiveMessageSize(64 << 20);
  if (pings) {
    builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS,
                               static_cast<int>(absl::ToInt64Milliseconds(keepalive.time)));
    builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS,
                               static_cast<int>(absl::ToInt64Milliseconds(keepalive.timeout)));
    // Ping idle connections too, and without a cap on pings between data frames.
    builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
    builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  }
  for (grpc::Service* service : services) builder.RegisterService(service);
  started.server = builder.BuildAndStart();
  if (started.server == nullptr) {
    return absl::UnavailableError(absl::StrCat("cannot start gRPC server on ", address));
  }
  return started;
}

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

}  // namespace falcon::proto
