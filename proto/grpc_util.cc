#include "proto/grpc_util.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>

#include "absl/strings/str_cat.h"

namespace falcon {

absl::StatusOr<StartedServer> StartGrpcServer(const std::string& address,
                                              const std::vector<grpc::Service*>& services) {
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  StartedServer started;
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &started.port);
  builder.SetMaxReceiveMessageSize(64 << 20);
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

}  // namespace falcon
