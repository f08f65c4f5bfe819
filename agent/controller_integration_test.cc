// The agent against the real controller (//controller:falcon_controller, a separate process with
// RocksDB): the controller is killed with SIGKILL mid-stream and restarted on the same port and
// data directory while two ranks keep training; and the controller's disk (a small tmpfs) fills up
// mid-stream and is freed again. Afterwards the controller's job history has every iteration
// exactly once with the right job iteration time, also after a restart, and it saw no stale
// (duplicated) or rejected summary.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "agent/agent.h"
#include "agent/testing/fast_options.h"
#include "agent/testing/messages.h"
#include "agent/testing/prometheus_text.h"
#include "agent/testing/shim_test_client.h"
#include "common/clock.h"
#include "common/subprocess.h"
#include "common/testing/http_get.h"
#include "controller/metrics/metric_table.h"
#include "gtest/gtest.h"
#include "proto/falcon/v1/control.grpc.pb.h"
#include "tests/testing/skip.h"
#include "tests/testing/tmpfs.h"

namespace falcon::agent {
namespace {

using testing::ShimTestClient;

constexpr char kJob[] = "ctl-job";
constexpr uint64_t kComm = 0xC1;
constexpr absl::Duration kWait = absl::Seconds(60);

std::string ControllerBinary() {
  return absl::StrCat(std::getenv("TEST_SRCDIR"), "/", std::getenv("TEST_WORKSPACE"),
                      "/controller/falcon_controller");
}

// The controller as a child process.
class ControllerProcess {
 public:
  ~ControllerProcess() { Kill(); }

  // Starts it on 127.0.0.1:`port` (0: any) with `data_dir`; waits for its address lines.
  ::testing::AssertionResult Start(int port, const std::string& data_dir) {
    // Beside the test's other outputs (not in data_dir, which may be a tmpfs that fills up).
    log_ = absl::StrCat(std::getenv("TEST_TMPDIR"), "/controller.log.", ++starts_);
    std::vector<std::string> args = {ControllerBinary(),
                                     absl::StrCat("--listen=127.0.0.1:", port),
                                     "--plaintext",
                                     "--metrics_listen=127.0.0.1:0",
                                     absl::StrCat("--data_dir=", data_dir),
                                     "--tick=50ms",
                                     "--job_end_grace=600s"};
    common::SpawnOptions options;
    options.argv = args;
    options.stdout_stream = common::Stdio::File(log_);
    options.stderr_stream = common::Stdio::SameAsStdout();
    absl::StatusOr<common::Subprocess> proc = common::Subprocess::Spawn(options);
    if (!proc.ok()) return ::testing::AssertionFailure() << proc.status();
    proc_ = std::move(*proc);
    const absl::Time deadline = absl::Now() + kWait;
    while (absl::Now() < deadline) {
      std::ifstream in(log_);
      std::stringstream text;
      text << in.rdbuf();
      std::string line;
      std::string listen, metrics;
      while (std::getline(text, line)) {
        if (line.rfind("listening on ", 0) == 0) listen = line.substr(13);
        if (line.rfind("metrics on ", 0) == 0) metrics = line.substr(11);
      }
      if (!listen.empty() && !metrics.empty()) {
        address_ = listen;
        metrics_ = metrics;
        return ::testing::AssertionSuccess();
      }
      absl::StatusOr<std::optional<common::ExitStatus>> ended = proc_->Poll();
      if (!ended.ok() || ended->has_value()) {
        proc_.reset();
        return ::testing::AssertionFailure()
               << "controller ended ("
               << (ended.ok() ? (*ended)->ToString() : ended.status().ToString()) << "):\n"
               << text.str();
      }
      absl::SleepFor(absl::Milliseconds(20));
    }
    return ::testing::AssertionFailure() << "controller did not start";
  }

  // SIGKILL: no shutdown, no flush.
  void Kill() { proc_.reset(); }  // ~Subprocess SIGKILLs and reaps a running child.

  const std::string& address() const { return address_; }
  const std::string& metrics() const { return metrics_; }
  int port() const { return std::stoi(address_.substr(address_.rfind(':') + 1)); }

 private:
  std::optional<common::Subprocess> proc_;
  int starts_ = 0;
  std::string log_;
  std::string address_;
  std::string metrics_;
};

// Iteration i of rank r lasts 10 ms + (i % 7) us, plus 500 ns on the rank whose turn it is to be
// the slowest (alternating), so the job iteration time names the rank it came from.
int64_t Duration(uint32_t rank, int64_t i) {
  return 10'000'000 + (i % 7) * 1000 + (static_cast<int64_t>(i % 2) == rank ? 500 : 0);
}
int64_t Start(int64_t i) { return i * 20'000'000; }

void SendIteration(ShimTestClient& c, uint32_t rank, int64_t i) {
  v1::ShimMessage ops;
  v1::OpBatch* b = ops.mutable_op_batch();
  b->set_sequence(static_cast<uint64_t>(i) + 1);
  v1::OpRecord* r = b->add_records();
  r->set_comm_id(kComm);
  r->set_op_kind(v1::OP_KIND_ALL_REDUCE);
  r->set_bytes(1 << 20);
  r->set_peer(-1);
  r->set_host_start_ns(Start(i) + 6'000'000);
  r->set_host_end_ns(Start(i) + 9'000'000);
  r->set_seq(static_cast<uint64_t>(i) + 1);
  r->set_iteration(i);
  ASSERT_TRUE(c.Send(ops));
  v1::ShimMessage hint;
  hint.mutable_iteration()->set_iteration(i);
  hint.mutable_iteration()->set_start_ns(Start(i));
  hint.mutable_iteration()->set_end_ns(Start(i) + Duration(rank, i));
  ASSERT_TRUE(c.Send(hint));
}

class ControllerIntegrationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/falcon-agent-ctl-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    data_dir_ = absl::StrCat(std::getenv("TEST_TMPDIR"), "/controller-data");
    ASSERT_TRUE(controller_.Start(0, data_dir_));
  }
  void TearDown() override {
    shims_.clear();
    agent_.reset();
    controller_.Kill();
    std::filesystem::remove_all(dir_);
  }

  // The agent (fast reconnects) and two shims of a 2-rank job.
  void StartAgentAndShims() {
    const AgentOptions o = testing::FastAgentOptions(controller_.address(), dir_ + "/agent.sock");
    auto agent = Agent::Start(o, clock_);
    ASSERT_TRUE(agent.ok()) << agent.status();
    agent_ = std::move(*agent);
    for (uint32_t r = 0; r < 2; ++r) {
      shims_.push_back(std::make_unique<ShimTestClient>(o.socket_path));
      v1::ShimMessage hello = testing::HelloMsg(kJob, r, 2, 5000 + static_cast<int32_t>(r));
      hello.mutable_hello()->set_pipeline_blocks(6);  // The model's shape, for S2L.
      hello.mutable_hello()->set_block_state_bytes(3 << 20);
      ASSERT_TRUE(shims_[r]->Send(hello));
      ASSERT_TRUE(shims_[r]->Next(v1::AgentToShim::kWelcome).has_value());
      ASSERT_TRUE(shims_[r]->Send(testing::CommMsg(kComm, {0, 1})));
    }
  }

  // The controller's stored job history has iterations [0, n) exactly once, each with the job
  // iteration time (the slower rank's).
  void ExpectHistoryExactlyOnce(int64_t n) {
    auto stub = v1::Control::NewStub(
        grpc::CreateChannel(controller_.address(), grpc::InsecureChannelCredentials()));
    grpc::ClientContext ctx;
    v1::GetHistoryRequest req;
    req.set_job(kJob);
    req.set_max_points(10000);
    v1::GetHistoryResponse history;
    ASSERT_TRUE(stub->GetHistory(&ctx, req, &history).ok());
    std::map<int64_t, int64_t> points;
    for (const v1::HistoryPoint& p : history.points()) {
      EXPECT_TRUE(points.emplace(p.iteration(), p.iteration_time_ns()).second) << p.iteration();
    }
    for (int64_t i = 0; i < n; ++i) {
      auto it = points.find(i);
      ASSERT_NE(it, points.end()) << "iteration " << i << " missing";
      EXPECT_EQ(it->second, std::max(Duration(0, i), Duration(1, i))) << "iteration " << i;
    }
  }

  v1::Job GetJob() {
    auto stub = v1::Control::NewStub(
        grpc::CreateChannel(controller_.address(), grpc::InsecureChannelCredentials()));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    v1::GetJobRequest req;
    req.set_job(kJob);
    v1::Job job;
    if (!stub->GetJob(&ctx, req, &job).ok()) job.set_last_iteration(-2);
    return job;
  }

  bool WaitJobIteration(int64_t iteration) {
    const absl::Time deadline = absl::Now() + kWait;
    while (absl::Now() < deadline) {
      if (GetJob().last_iteration() >= iteration) return true;
      absl::SleepFor(absl::Milliseconds(20));
    }
    return false;
  }

  double Metric(const std::string& name) {
    auto body = common::testing::HttpGet(controller_.metrics(), "/metrics");
    if (!body.ok()) return -1;
    auto samples = testing::ParsePrometheusText(*body);
    if (!samples.ok()) return -1;
    return testing::FindSample(*samples, name).value_or(0);
  }

  void Iterations(int64_t from, int64_t to) {
    for (int64_t i = from; i < to; ++i) {
      for (uint32_t r = 0; r < 2; ++r) SendIteration(*shims_[r], r, i);
    }
  }

  std::string dir_;
  std::string data_dir_;
  common::RealClock clock_;
  ControllerProcess controller_;
  std::unique_ptr<Agent> agent_;
  std::vector<std::unique_ptr<ShimTestClient>> shims_;
};

TEST_F(ControllerIntegrationTest, ControllerKilledMidStreamLosesAndDuplicatesNoSummary) {
  ASSERT_NO_FATAL_FAILURE(StartAgentAndShims());

  Iterations(0, 100);
  ASSERT_TRUE(WaitJobIteration(98));
  // The hellos' pipeline shape reached the controller's job (hello -> registration -> Job).
  EXPECT_EQ(GetJob().pipeline_blocks(), 6u);
  EXPECT_EQ(GetJob().block_state_bytes(), 3u << 20);
  Iterations(100, 120);
  EXPECT_EQ(Metric(controller::metrics::kIngestStaleSummaries.name), 0);
  controller_.Kill();  // Mid-stream: batches of 100..119 are in flight or buffered.
  Iterations(120, 200);
  const int port = controller_.port();
  ASSERT_TRUE(controller_.Start(port, data_dir_));
  Iterations(200, 300);
  for (uint32_t r = 0; r < 2; ++r) SendIteration(*shims_[r], r, 300);  // Completes 299.
  ASSERT_TRUE(WaitJobIteration(299));
  ASSERT_TRUE(agent_->Drain(kWait).ok());
  EXPECT_EQ(GetJob().pipeline_blocks(), 6u) << "stored with the job across the restart";

  ExpectHistoryExactlyOnce(300);
  EXPECT_EQ(Metric(controller::metrics::kIngestStaleSummaries.name), 0);
  EXPECT_EQ(Metric(controller::metrics::kIngestRejectedBatches.name), 0);
  EXPECT_EQ(agent_->link().stats().rejected_batches, 0u);
  EXPECT_EQ(agent_->buffer().stats().dropped_batches, 0u);
  EXPECT_GE(agent_->link().stats().connects, 2u);
}

// The controller's data directory on a small tmpfs that fills up mid-stream: writes fail, nothing
// is acknowledged that was not stored, the agent keeps and resends what was not acknowledged, and
// once space returns every iteration ends up stored exactly once, also across a restart.
class ControllerDiskFullTest : public ControllerIntegrationTest {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/falcon-agent-ctl-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    auto disk = tests::testing::Tmpfs::Mount(
        absl::StrCat(std::getenv("TEST_TMPDIR"), "/controller-disk"), 8 << 20);
    if (!disk.ok()) FALCON_SKIP_OR_FAIL(std::string(disk.status().message()));
    disk_ = std::move(*disk);
    data_dir_ = disk_->path() + "/controller-data";
    ASSERT_TRUE(controller_.Start(0, data_dir_));
  }
  void TearDown() override {
    ControllerIntegrationTest::TearDown();  // The controller is gone before the unmount.
    disk_.reset();
  }

  double Errors(const std::string& where) {
    auto body = common::testing::HttpGet(controller_.metrics(), "/metrics");
    if (!body.ok()) return -1;
    auto samples = testing::ParsePrometheusText(*body);
    if (!samples.ok()) return -1;
    return testing::FindSample(*samples, controller::metrics::kErrors.name, {{"where", where}})
        .value_or(0);
  }

  std::unique_ptr<tests::testing::Tmpfs> disk_;
};

TEST_F(ControllerDiskFullTest, FullDiskLosesAndDuplicatesNoSummaryAcrossARestart) {
  ASSERT_NO_FATAL_FAILURE(StartAgentAndShims());
  Iterations(0, 100);
  ASSERT_TRUE(WaitJobIteration(98));

  ASSERT_TRUE(disk_->Fill("filler").ok());
  // Training goes on while the controller cannot store: writes fail, the streams end and the
  // agent keeps everything not acknowledged.
  int64_t i = 100;
  const absl::Time deadline = absl::Now() + kWait;
  while (Errors("batch_commit") < 1 && absl::Now() < deadline) {
    Iterations(i, i + 5);
    i += 5;
    absl::SleepFor(absl::Milliseconds(20));
  }
  ASSERT_GE(Errors("batch_commit"), 1) << "no store write failed";
  // Keep the disk full (whatever RocksDB frees by closing its log is taken again) for a while:
  // the controller's recovery attempts fail, hellos and batches are refused.
  for (int round = 0; round < 40; ++round) {
    ASSERT_TRUE(disk_->Fill("filler").ok());
    Iterations(i, i + 2);
    i += 2;
    absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_GE(Errors("hello_store_unavailable") + Errors("batch_store_unavailable"), 1);
  EXPECT_LT(GetJob().last_iteration(), i - 50);
  ASSERT_TRUE(disk_->Free("filler").ok());
  const int64_t end = i + 100;
  Iterations(i, end);
  for (uint32_t r = 0; r < 2; ++r) SendIteration(*shims_[r], r, end);  // Completes end - 1.
  ASSERT_TRUE(WaitJobIteration(end - 1));
  ASSERT_TRUE(agent_->Drain(kWait).ok());
  ExpectHistoryExactlyOnce(end);
  EXPECT_EQ(Metric(controller::metrics::kIngestStaleSummaries.name), 0);
  EXPECT_EQ(Metric(controller::metrics::kIngestRejectedBatches.name), 0);
  EXPECT_EQ(agent_->link().stats().rejected_batches, 0u);
  EXPECT_EQ(agent_->buffer().stats().dropped_batches, 0u);
  EXPECT_GE(agent_->link().stats().connects, 2u);

  // Everything acknowledged was durable: a SIGKILL and restart keep all of it.
  controller_.Kill();
  ASSERT_TRUE(controller_.Start(controller_.port(), data_dir_));
  ExpectHistoryExactlyOnce(end);
}

}  // namespace
}  // namespace falcon::agent
