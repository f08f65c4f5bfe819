#include "proto/reflection_client.h"

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/support/byte_buffer.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "proto/grpc_util.h"
#include "proto/reflection/reflection_wire.pb.h"

namespace falcon::proto {
namespace {

constexpr char kMethod[] = "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo";

// Waits for the completion-queue event of `tag`; false when the operation failed.
bool Await(grpc::CompletionQueue* cq, void* tag) {
  void* got = nullptr;
  bool ok = false;
  if (!cq->Next(&got, &ok)) return false;
  return ok && got == tag;
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ListServicesByReflection(
    const std::shared_ptr<grpc::Channel>& channel, absl::Duration timeout) {
  grpc::GenericStub stub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  grpc::CompletionQueue cq;
  auto call = stub.PrepareCall(&ctx, kMethod, &cq);
  int tag = 0;
  auto finish = [&](absl::Status fallback) -> absl::Status {
    grpc::Status status;
    call->Finish(&status, &tag);
    void* got;
    bool ok;
    cq.Next(&got, &ok);
    cq.Shutdown();
    while (cq.Next(&got, &ok)) {
    }
    if (!status.ok()) return FromGrpcStatus(status);
    return fallback;
  };
  call->StartCall(&tag);
  if (!Await(&cq, &tag)) return finish(absl::UnavailableError("reflection call did not start"));

  reflection_wire::ServerReflectionRequest request;
  request.set_list_services("*");
  const std::string request_bytes = request.SerializeAsString();
  grpc::Slice slice(request_bytes);
  grpc::ByteBuffer out(&slice, 1);
  call->Write(out, &tag);
  if (!Await(&cq, &tag)) return finish(absl::UnavailableError("reflection write failed"));
  grpc::ByteBuffer in;
  call->Read(&in, &tag);
  if (!Await(&cq, &tag)) return finish(absl::UnavailableError("reflection read failed"));
  call->WritesDone(&tag);
  Await(&cq, &tag);

  reflection_wire::ServerReflectionResponse response;
  std::vector<grpc::Slice> slices;
  std::string response_bytes;
  if (in.Dump(&slices).ok()) {
    for (const grpc::Slice& s : slices) {
      response_bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
    }
  }
  if (!response.ParseFromString(response_bytes)) {
    return finish(absl::InternalError("malformed reflection response"));
  }
  absl::Status status = finish(absl::OkStatus());
  if (!status.ok()) return status;
  if (response.has_error_response()) {
    return absl::Status(static_cast<absl::StatusCode>(response.error_response().error_code()),
                        response.error_response().error_message());
  }
  if (!response.has_list_services_response()) {
    return absl::InternalError("reflection response has no list_services_response");
  }
  std::vector<std::string> names;
  for (const auto& s : response.list_services_response().service()) names.push_back(s.name());
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace falcon::proto
