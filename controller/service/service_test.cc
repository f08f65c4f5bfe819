// The gRPC adapters end to end on loopback (in-memory store): every Control RPC validates its
// input (INVALID_ARGUMENT naming the field, NOT_FOUND where control.proto says so); the Telemetry
// stream answers protocol violations and malformed or oversized batches as telemetry.proto says;
// reflection lists both services.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/clock.h"
#include "common/testing/log_capture.h"
#include "controller/service/controller_server.h"
#include "controller/testing/job_fixtures.h"
#include "controller/testing/loopback_agent.h"
#include "gtest/gtest.h"
#include "proto/falcon/v1/control.grpc.pb.h"
#include "proto/reflection_client.h"

namespace falcon::controller::service {
namespace {

using testing::LoopbackAgent;

class ServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ServerOptions options;
    options.listen = "127.0.0.1:0";
    options.controller.limits.max_ops_per_batch = 100;
    auto s = ControllerServer::Start(options, &clock_);
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::move(*s);
    channel_ = grpc::CreateChannel(Target(), grpc::InsecureChannelCredentials());
    control_ = falcon::v1::Control::NewStub(channel_);
    agent_ = std::make_unique<LoopbackAgent>(
        "node-0", "node-0", testing::RanksOfNode(spec_, 0),
        std::vector<falcon::v1::JobRegistration>{testing::NodeRegistration(spec_, 0)});
    ASSERT_TRUE(agent_->Connect(Target(), absl::Seconds(10)).ok());
  }
  std::string Target() const { return absl::StrCat("127.0.0.1:", server_->port()); }

  // Expects `status` to carry `code` and mention `field`.
  static void ExpectError(const grpc::Status& status, grpc::StatusCode code,
                          const std::string& field) {
    EXPECT_EQ(status.error_code(), code) << field << ": " << status.error_message();
    EXPECT_NE(status.error_message().find(field), std::string::npos) << status.error_message();
  }

  testing::LayoutSpec spec_;
  common::FakeClock clock_;
  std::unique_ptr<ControllerServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<falcon::v1::Control::Stub> control_;
  std::unique_ptr<LoopbackAgent> agent_;
};

#define CALL(method, request, response)                \
  [&] {                                                \
    grpc::ClientContext ctx;                           \
    return control_->method(&ctx, request, &response); \
  }()

TEST_F(ServiceTest, EveryControlRpcValidatesItsInput) {
  const grpc::StatusCode kBad = grpc::StatusCode::INVALID_ARGUMENT;
  {
    falcon::v1::ListJobsResponse r;
    ASSERT_TRUE(CALL(ListJobs, falcon::v1::ListJobsRequest(), r).ok());
    ASSERT_EQ(r.jobs_size(), 1);
    EXPECT_EQ(r.jobs(0).job(), spec_.job);
  }
  {
    falcon::v1::Job r;
    falcon::v1::GetJobRequest q;
    ExpectError(CALL(GetJob, q, r), kBad, "job");
    q.set_job("ghost");
    ExpectError(CALL(GetJob, q, r), grpc::StatusCode::NOT_FOUND, "job");
    q.set_job(spec_.job);
    ASSERT_TRUE(CALL(GetJob, q, r).ok());
    EXPECT_EQ(r.ranks_size(), 2);
  }
  {
    falcon::v1::ListEventsResponse r;
    falcon::v1::ListEventsRequest q;
    q.set_job("ghost");
    ExpectError(CALL(ListEvents, q, r), grpc::StatusCode::NOT_FOUND, "job");
    q.set_job("");
    q.set_limit(10001);
    ExpectError(CALL(ListEvents, q, r), kBad, "limit");
  }
  {
    falcon::v1::Event r;
    falcon::v1::GetEventRequest q;
    ExpectError(CALL(GetEvent, q, r), kBad, "event_id");
    q.set_event_id(42);
    ExpectError(CALL(GetEvent, q, r), grpc::StatusCode::NOT_FOUND, "event_id");
  }
  {
    falcon::v1::ListDirectivesResponse r;
    falcon::v1::ListDirectivesRequest q;
    q.set_job("ghost");
    ExpectError(CALL(ListDirectives, q, r), grpc::StatusCode::NOT_FOUND, "job");
    q.set_job("");
    q.set_limit(20000);
    ExpectError(CALL(ListDirectives, q, r), kBad, "limit");
  }
  {
    falcon::v1::GetHistoryResponse r;
    falcon::v1::GetHistoryRequest q;
    ExpectError(CALL(GetHistory, q, r), kBad, "job");
    q.set_job(spec_.job);
    q.set_from_iteration(-1);
    ExpectError(CALL(GetHistory, q, r), kBad, "from_iteration");
    q.set_from_iteration(0);
    q.set_max_points(100001);
    ExpectError(CALL(GetHistory, q, r), kBad, "max_points");
  }
  {
    falcon::v1::Settings r;
    falcon::v1::GetSettingsRequest q;
    ASSERT_TRUE(CALL(GetSettings, q, r).ok());  // "" = defaults.
    q.set_job("ghost");
    ExpectError(CALL(GetSettings, q, r), grpc::StatusCode::NOT_FOUND, "job");
    falcon::v1::SetSettingsRequest s;
    ExpectError(CALL(SetSettings, s, r), kBad, "settings");
    s.mutable_settings()->set_job(spec_.job);
    s.mutable_settings()->set_change_probability(1.0);
    ExpectError(CALL(SetSettings, s, r), kBad, "settings.change_probability");
    s.mutable_settings()->clear_change_probability();
    s.mutable_settings()->set_min_gap_iterations(0);
    ExpectError(CALL(SetSettings, s, r), kBad, "settings.min_gap_iterations");
    s.mutable_settings()->set_min_gap_iterations(20);
    ASSERT_TRUE(CALL(SetSettings, s, r).ok());
    EXPECT_EQ(r.min_gap_iterations(), 20u);
  }
  {
    falcon::v1::ForceValidationResponse r;
    falcon::v1::ForceValidationRequest q;
    ExpectError(CALL(ForceValidation, q, r), kBad, "job");
    q.set_job("ghost");
    ExpectError(CALL(ForceValidation, q, r), grpc::StatusCode::NOT_FOUND, "job");
  }
  {
    falcon::v1::DryRunPlanResponse r;
    falcon::v1::DryRunPlanRequest q;
    q.set_job("ghost");
    ExpectError(CALL(DryRunPlan, q, r), grpc::StatusCode::NOT_FOUND, "job");
    q.set_job(spec_.job);
    q.add_slow_ranks(7);
    ExpectError(CALL(DryRunPlan, q, r), kBad, "slow_ranks[0]");
    q.clear_slow_ranks();
    q.add_slow_nodes("node-9");
    ExpectError(CALL(DryRunPlan, q, r), kBad, "slow_nodes[0]");
    q.clear_slow_nodes();
    q.set_slowdown_ratio(-1);
    ExpectError(CALL(DryRunPlan, q, r), kBad, "slowdown_ratio");
    q.set_slowdown_ratio(1.5);
    // No active event and no hypothetical verdict: nothing to plan for.
    EXPECT_EQ(CALL(DryRunPlan, q, r).error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  }
  {
    grpc::ClientContext ctx;
    falcon::v1::WatchEventsRequest q;
    q.set_job("ghost");
    auto stream = control_->WatchEvents(&ctx, q);
    falcon::v1::Event e;
    EXPECT_FALSE(stream->Read(&e));
    ExpectError(stream->Finish(), grpc::StatusCode::NOT_FOUND, "job");
  }
}

TEST_F(ServiceTest, ReflectionListsBothServices) {
  auto services = proto::ListServicesByReflection(channel_, absl::Seconds(10));
  ASSERT_TRUE(services.ok()) << services.status();
  for (const char* s : {"falcon.v1.Telemetry", "falcon.v1.Control"}) {
    EXPECT_NE(std::find(services->begin(), services->end(), s), services->end()) << s;
  }
}

TEST_F(ServiceTest, MalformedAndOversizedBatchesAreAnsweredAndTheStreamStaysOpen) {
  falcon::v1::TelemetryBatch bad;
  bad.set_job(spec_.job);
  *bad.add_iterations() = testing::MakeSummary(spec_, 0, 0, 100);
  bad.mutable_iterations(0)->set_iteration_time_ns(-1);
  agent_->Send(bad);
  falcon::v1::TelemetryBatch big;
  big.set_job(spec_.job);
  for (int i = 0; i < 101; ++i) big.add_ops();
  agent_->Send(big);
  falcon::v1::TelemetryBatch good;
  good.set_job(spec_.job);
  *good.add_iterations() = testing::MakeSummary(spec_, 0, 0, 100'000'000);
  agent_->Send(good);
  ASSERT_TRUE(agent_->WaitAcked(absl::Seconds(10)).ok());
  auto rejected = agent_->rejected();
  ASSERT_EQ(rejected.size(), 2u);
  EXPECT_EQ(rejected[0].error().field(), "batch.iterations[0].iteration_time_ns");
  EXPECT_EQ(rejected[1].error().field(), "batch.ops");
  // A resent duplicate is acknowledged again, without error.
  falcon::v1::AgentMessage dup;
  *dup.mutable_batch() = good;
  dup.mutable_batch()->set_sequence(3);
  ASSERT_TRUE(agent_->SendRaw(dup));
  agent_->Send(good);  // Sequence 4: iteration 0 again is stale, but the batch is fine.
  ASSERT_TRUE(agent_->WaitAcked(absl::Seconds(10)).ok());
  EXPECT_EQ(agent_->rejected().size(), 2u);
}

TEST_F(ServiceTest, DataBeforeHelloEndsTheStream) {
  auto stub = falcon::v1::Telemetry::NewStub(channel_);
  grpc::ClientContext ctx;
  auto stream = stub->Connect(&ctx);
  falcon::v1::AgentMessage batch;
  batch.mutable_batch()->set_sequence(1);
  ASSERT_TRUE(stream->Write(batch));
  falcon::v1::ControllerMessage reply;
  EXPECT_FALSE(stream->Read(&reply));
  ExpectError(stream->Finish(), grpc::StatusCode::FAILED_PRECONDITION, "hello");

  grpc::ClientContext ctx2;
  auto stream2 = stub->Connect(&ctx2);
  falcon::v1::AgentMessage hello;
  hello.mutable_hello()->set_agent_id("x");
  hello.mutable_hello()->set_node("n");
  *hello.mutable_hello()->add_jobs() = testing::NodeRegistration(spec_, 1);
  hello.mutable_hello()->mutable_jobs(0)->mutable_ranks(0)->set_pid(0);
  ASSERT_TRUE(stream2->Write(hello));
  EXPECT_FALSE(stream2->Read(&reply));
  ExpectError(stream2->Finish(), grpc::StatusCode::INVALID_ARGUMENT, "hello.jobs[0].ranks[0].pid");
}

TEST_F(ServiceTest, ShutdownLogsEachStepWithGlog) {
  common::testing::LogCapture log;
  server_->Shutdown();
  server_->Shutdown();  // Idempotent: logged once.
  const std::vector<std::string> lines = log.Lines();
  std::vector<std::string> steps;
  for (const char* what : {"controller shutting down port=", "grpc server stopped port=",
                           "controller loop drained", "store closed data_dir=(in memory)"}) {
    for (size_t i = 0; i < lines.size(); ++i) {
      if (lines[i].rfind(what, 0) == 0) steps.push_back(absl::StrCat(i, " ", what));
    }
  }
  ASSERT_EQ(steps.size(), 4u) << absl::StrJoin(lines, "\n");
  // In that order.
  for (size_t k = 1; k < steps.size(); ++k) {
    EXPECT_LT(std::stoi(steps[k - 1]), std::stoi(steps[k])) << steps[k];
  }
}

}  // namespace
}  // namespace falcon::controller::service
