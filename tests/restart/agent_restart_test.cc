// An agent restart under a running job (docs/operations.md#agent-restarts): the real controller,
// one real agent and the reference trainer (DP=2, both ranks on the one node, on the real shim)
// run on loopback; the job has an open event (a forced validation: pause directive and validation
// tasks in flight) when the agent is killed with SIGKILL and started again with the same node
// name. Within --job_end_grace:
//   * the job stays one job (same name, same agent id) and never ends;
//   * its event is not closed (localization goes on through the new agent);
//   * the controller's job history has every iteration from before the kill to well after the
//     restart: the agent is killed while the trainer is several iterations ahead of the
//     controller, and what the killed agent had taken from the shims but not delivered is resent
//     by the shims to the new agent.
// Every wait is on a condition (with a generous deadline), never a fixed sleep.
#include <algorithm>
#include <chrono>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpcpp/client_context.h"
#include "gtest/gtest.h"
#include "proto/falcon/v1/control.grpc.pb.h"
#include "tests/harness/local_cluster.h"

namespace falcon::tests::restart {
namespace {

using ::falcon::tests::harness::LocalCluster;
using ::falcon::tests::harness::LocalClusterOptions;

constexpr char kJob[] = "restart-job";
// Deadlines, not measurements: each wait below normally ends within a few seconds.
constexpr absl::Duration kWait = absl::Seconds(40);

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The highest iteration in the trainer's JSON log (one line per rank and iteration); -1 none.
int64_t LastTrainerIteration(const std::string& json_log) {
  constexpr absl::string_view kKey = "{\"iteration\":";
  int64_t last = -1;
  std::istringstream lines(ReadFile(json_log));
  std::string line;
  while (std::getline(lines, line)) {
    if (!absl::StartsWith(line, kKey)) continue;
    const size_t end = line.find(',', kKey.size());
    int64_t i = -1;
    if (end != std::string::npos &&
        absl::SimpleAtoi(line.substr(kKey.size(), end - kKey.size()), &i)) {
      last = std::max(last, i);
    }
  }
  return last;
}

void SetDeadline(grpc::ClientContext* ctx) {
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
}

absl::StatusOr<falcon::v1::Job> GetJob(harness::LocalCluster& cluster) {
  auto stub = cluster.NewControlStub();
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  falcon::v1::GetJobRequest req;
  req.set_job(kJob);
  falcon::v1::Job job;
  grpc::Status s = stub->GetJob(&ctx, req, &job);
  if (!s.ok()) return absl::UnavailableError(s.error_message());
  return job;
}

// Polls until `pred` holds for the job; false after kWait.
bool WaitForJob(harness::LocalCluster& cluster,
                const std::function<bool(const falcon::v1::Job&)>& pred) {
  const absl::Time deadline = absl::Now() + 2 * kWait;
  while (absl::Now() < deadline) {
    absl::StatusOr<falcon::v1::Job> job = GetJob(cluster);
    if (job.ok() && pred(*job)) return true;
    absl::SleepFor(absl::Milliseconds(100));
  }
  return false;
}

TEST(AgentRestartTest, JobEventAndHistorySurviveAKilledAgent) {
  harness::LocalClusterOptions o;
  o.dp = 2;
  o.pp = 1;
  o.nodes = 1;
  o.job = kJob;
  // Short iterations (tens of ms) of slept emulated compute; runs until stopped.
  o.trainer_args = {
      "--steps=1000000", "--micro-batches=2", "--layers=1",      "--hidden=16",
      "--embed=8",       "--batch=8",         "--print_every=0", "--emulated_compute_ms=10"};
  o.controller_args = falcon::tests::harness::TunedControllerArgs();
  o.controller_args.push_back("--job_end_grace=60s");
  absl::StatusOr<std::unique_ptr<harness::LocalCluster>> started = harness::LocalCluster::Start(o);
  ASSERT_TRUE(started.ok()) << started.status();
  harness::LocalCluster& cluster = **started;
  // Iterations in flight: the trainer has finished several that the controller does not have
  // yet (the agent holds them until its next flush, every second).
  int64_t controller_last = -1;
  {
    const absl::Time deadline = absl::Now() + kWait;
    int64_t trainer_last = -1;
    while (absl::Now() < deadline) {
      absl::StatusOr<falcon::v1::Job> job = GetJob(cluster);
      if (job.ok()) controller_last = job->last_iteration();
      trainer_last = LastTrainerIteration(cluster.trainer_json_log());
      if (controller_last >= 10 && trainer_last >= controller_last + 4) break;
      absl::SleepFor(absl::Milliseconds(10));
    }
    ASSERT_GE(trainer_last, controller_last + 4)
        << "the trainer never got ahead of the controller; controller log:\n"
        << ReadFile(cluster.log_path("controller"));
  }

  // An open event with directives in flight: a forced validation pauses every rank and sends
  // validation tasks; the agent is killed right away, in the middle of it.
  auto stub = cluster.NewControlStub();
  uint64_t event_id = 0;
  {
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    falcon::v1::ForceValidationRequest req;
    req.set_job(kJob);
    falcon::v1::ForceValidationResponse resp;
    grpc::Status s = stub->ForceValidation(&ctx, req, &resp);
    ASSERT_TRUE(s.ok()) << s.error_message();
    event_id = resp.event_id();
  }
  ASSERT_TRUE(cluster.RestartAgent(0, /*kill=*/true).ok());
  const int64_t kill_iteration = controller_last;

  // The job goes on through the new agent, well past the kill.
  const bool advanced = WaitForJob(
      cluster, [&](const falcon::v1::Job& j) { return j.last_iteration() >= kill_iteration + 30; });
  const std::string controller_log = ReadFile(cluster.log_path("controller"));
  ASSERT_TRUE(advanced) << "no progress after the agent restart; controller log:\n"
                        << controller_log;

  // One job, never ended, with its event still open.
  {
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    falcon::v1::ListJobsResponse jobs;
    ASSERT_TRUE(stub->ListJobs(&ctx, falcon::v1::ListJobsRequest(), &jobs).ok());
    ASSERT_EQ(jobs.jobs_size(), 1);
    EXPECT_EQ(jobs.jobs(0).job(), kJob);
    EXPECT_NE(jobs.jobs(0).state(), falcon::v1::JOB_STATE_ENDED);
  }
  EXPECT_EQ(controller_log.find(absl::StrCat("job ended job=", kJob)), std::string::npos)
      << controller_log;
  {
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    falcon::v1::GetEventRequest req;
    req.set_event_id(event_id);
    falcon::v1::Event event;
    ASSERT_TRUE(stub->GetEvent(&ctx, req, &event).ok());
    // Never closed because the job ended. The forced validation of this healthy job either is
    // still running or reached its verdict (no culprit) through the new agent, which closes the
    // event with "forced validation done" (docs/algorithms.md#verdict).
    for (const falcon::v1::StateTransition& t : event.transitions()) {
      EXPECT_EQ(t.reason().find("job ended"), std::string::npos) << event.ShortDebugString();
    }
    if (event.state() == falcon::v1::EVENT_STATE_CLOSED) {
      ASSERT_GT(event.transitions_size(), 0);
      EXPECT_EQ(event.transitions(event.transitions_size() - 1)
                    .reason()
                    .rfind("forced validation done", 0),
                0u)
          << event.ShortDebugString();
    }
  }

  // Every job iteration from before the kill to after the restart is in the history.
  falcon::v1::GetHistoryResponse history;
  {
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    falcon::v1::GetHistoryRequest req;
    req.set_job(kJob);
    ASSERT_TRUE(stub->GetHistory(&ctx, req, &history).ok());
  }
  ASSERT_GT(history.points_size(), 0);
  std::vector<int64_t> missing;
  for (int i = 1; i < history.points_size(); ++i) {
    for (int64_t it = history.points(i - 1).iteration() + 1; it < history.points(i).iteration();
         ++it) {
      missing.push_back(it);
    }
  }
  EXPECT_LE(history.points(0).iteration(), kill_iteration - 5);
  EXPECT_GE(history.points(history.points_size() - 1).iteration(), kill_iteration + 30);
  EXPECT_TRUE(missing.empty()) << "iterations missing from the history (killed at ~"
                               << kill_iteration << "): " << absl::StrJoin(missing, ",");
}

}  // namespace
}  // namespace falcon::tests::restart
