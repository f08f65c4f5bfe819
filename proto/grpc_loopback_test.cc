// Starts a gRPC server on 127.0.0.1:0 with Falcon's helper, lists its services through server
// reflection, and calls one RPC of the wire contract.
#include <grpcpp/grpcpp.h>

#include "gtest/gtest.h"
#include "proto/falcon/v1/control.grpc.pb.h"
#include "proto/grpc_util.h"
#include "proto/reflection_client.h"

namespace falcon::proto {
namespace {

// A Control service that only answers GetSettings, echoing the requested job with defaults.
class SettingsOnlyControl final : public v1::Control::Service {
 public:
  grpc::Status GetSettings(grpc::ServerContext*, const v1::GetSettingsRequest* request,
                           v1::Settings* response) override {
    if (request->job().empty()) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "job: must not be empty");
    }
    response->set_job(request->job());
    response->set_verification_min_ratio(0.10);
    return grpc::Status::OK;
  }
};

TEST(GrpcLoopbackTest, ReflectionListsServicesAndRpcWorks) {
  SettingsOnlyControl service;
  auto started = StartGrpcServer("127.0.0.1:0", {&service});
  ASSERT_TRUE(started.ok()) << started.status();
  ASSERT_GT(started->port, 0);
  auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(started->port),
                                     grpc::InsecureChannelCredentials());

  auto services = ListServicesByReflection(channel, absl::Seconds(10));
  ASSERT_TRUE(services.ok()) << services.status();
  EXPECT_NE(std::find(services->begin(), services->end(), "falcon.v1.Control"), services->end());
  EXPECT_NE(
      std::find(services->begin(), services->end(), "grpc.reflection.v1alpha.ServerReflection"),
      services->end());

  auto stub = v1::Control::NewStub(channel);
  {
    grpc::ClientContext ctx;
    v1::GetSettingsRequest request;
    request.set_job("llm-7b");
    v1::Settings settings;
    grpc::Status status = stub->GetSettings(&ctx, request, &settings);
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(settings.job(), "llm-7b");
    EXPECT_DOUBLE_EQ(settings.verification_min_ratio(), 0.10);
  }
  {
    grpc::ClientContext ctx;
    v1::Settings settings;
    grpc::Status status = stub->GetSettings(&ctx, v1::GetSettingsRequest(), &settings);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_EQ(FromGrpcStatus(status).code(), absl::StatusCode::kInvalidArgument);
  }
  {
    grpc::ClientContext ctx;
    v1::ListJobsResponse jobs;
    grpc::Status status = stub->ListJobs(&ctx, v1::ListJobsRequest(), &jobs);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNIMPLEMENTED);
  }
  started->server->Shutdown();
}

TEST(GrpcLoopbackTest, UnreachableServerIsUnavailable) {
  // Bind and release a port so nothing listens there.
  SettingsOnlyControl service;
  auto started = StartGrpcServer("127.0.0.1:0", {&service});
  ASSERT_TRUE(started.ok());
  const int port = started->port;
  started->server->Shutdown();
  started->server.reset();
  auto channel =
      grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials());
  auto services = ListServicesByReflection(channel, absl::Seconds(1));
  ASSERT_FALSE(services.ok());
  EXPECT_TRUE(absl::IsUnavailable(services.status()) || absl::IsDeadlineExceeded(services.status()))
      << services.status();
}

TEST(GrpcLoopbackTest, PortInUseOrOutOfRangeIsAnError) {
  SettingsOnlyControl service;
  auto first = StartGrpcServer("127.0.0.1:0", {&service});
  ASSERT_TRUE(first.ok()) << first.status();
  // A second server on the same port must not share it (SO_REUSEPORT would split the clients).
  SettingsOnlyControl other;
  auto second = StartGrpcServer("127.0.0.1:" + std::to_string(first->port), {&other});
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  for (const char* bad : {"127.0.0.1:99999", "127.0.0.1:-1", "127.0.0.1:x", "127.0.0.1"}) {
    auto s = StartGrpcServer(bad, {&other});
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(s.status().message().find(bad), std::string::npos) << s.status();
  }
  first->server->Shutdown();
}

TEST(GrpcStatusTest, CodesMapOneToOne) {
  for (int code = 0; code <= 16; ++code) {
    absl::Status s(static_cast<absl::StatusCode>(code), code == 0 ? "" : "msg");
    EXPECT_EQ(FromGrpcStatus(ToGrpcStatus(s)), s);
  }
}

}  // namespace
}  // namespace falcon::proto
