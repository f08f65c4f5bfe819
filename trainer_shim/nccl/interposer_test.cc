// libfalcon_nccl.so under LD_PRELOAD in front of libfake_nccl.so, driven through fake_nccl_app
// (a subprocess) and observed through FakeAgent: interception, results unchanged, op order,
// groups, communicator membership, device timing and a pause at a safe point.
#include <fcntl.h>
#include <poll.h>
#include <time.h>
#include <unistd.h>

#include <climits>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/subprocess.h"
#include "gtest/gtest.h"
#include "trainer_shim/fake_agent.h"
#include "trainer_shim/nccl/comm_registry.h"

extern char** environ;

namespace falcon::trainer_shim::nccl {
namespace {

using falcon::v1::OpRecord;

int64_t MonotonicNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

std::string Abs(const char* env_name) {
  const char* rel = std::getenv(env_name);
  if (rel == nullptr) return "";
  char buf[PATH_MAX];
  return realpath(rel, buf) != nullptr ? std::string(buf) : std::string(rel);
}

// A child process with piped stdin/stdout.
class Child {
 public:
  Child(const std::string& program, const std::vector<std::string>& args,
        const std::vector<std::string>& extra_env) {
    common::SpawnOptions options;
    options.argv = {program};
    options.argv.insert(options.argv.end(), args.begin(), args.end());
    options.env.emplace();
    for (char** e = environ; *e != nullptr; ++e) {
      if (!absl::StartsWith(*e, "LD_PRELOAD=") && !absl::StartsWith(*e, "FALCON_")) {
        options.env->push_back(*e);
      }
    }
    options.env->insert(options.env->end(), extra_env.begin(), extra_env.end());
    options.stdin_stream = common::Stdio::Pipe();
    options.stdout_stream = common::Stdio::Pipe();
    absl::StatusOr<common::Subprocess> proc = common::Subprocess::Spawn(options);
    EXPECT_TRUE(proc.ok()) << proc.status();
    if (proc.ok()) proc_ = std::move(*proc);
  }
  // A child still running is SIGKILLed and reaped by ~Subprocess.

  // Next stdout line; false at EOF or after 60 s without one.
  bool ReadLine(std::string* line) {
    for (;;) {
      const size_t nl = buffer_.find('\n');
      if (nl != std::string::npos) {
        *line = buffer_.substr(0, nl);
        buffer_.erase(0, nl + 1);
        lines_.push_back(*line);
        return true;
      }
      if (!proc_.has_value()) return false;
      pollfd p{proc_->stdout_fd(), POLLIN, 0};
      if (poll(&p, 1, 60'000) <= 0) return false;
      char buf[4096];
      const ssize_t n = read(proc_->stdout_fd(), buf, sizeof(buf));
      if (n <= 0) return false;
      buffer_.append(buf, static_cast<size_t>(n));
    }
  }
  void WriteLine(const std::string& s) {
    const std::string l = s + "\n";
    ASSERT_TRUE(proc_.has_value());
    EXPECT_EQ(write(proc_->stdin_fd(), l.data(), l.size()), static_cast<ssize_t>(l.size()));
  }
  // Reads to EOF and waits; returns the exit status (-1 if abnormal).
  int Finish() {
    if (!proc_.has_value()) return -1;
    proc_->CloseStdin();
    std::string line;
    while (ReadLine(&line)) {
    }
    absl::StatusOr<common::ExitStatus> status = proc_->Wait();
    EXPECT_TRUE(status.ok()) << status.status();
    return status.ok() && status->exited() ? status->code() : -1;
  }
  std::vector<std::string> LinesWithPrefix(const std::string& prefix) const {
    std::vector<std::string> out;
    for (const auto& l : lines_) {
      if (absl::StartsWith(l, prefix)) out.push_back(l);
    }
    return out;
  }

 private:
  std::optional<common::Subprocess> proc_;
  std::string buffer_;
  std::vector<std::string> lines_;
};

// Drops the interposer's membership exchanges (GroupStart, AllGather count=1 int32, GroupEnd)
// from a fake NCCL log; counts them in *exchanges.
std::vector<std::string> WithoutExchanges(const std::vector<std::string>& log, int* exchanges) {
  std::vector<std::string> out;
  *exchanges = 0;
  for (size_t i = 0; i < log.size(); ++i) {
    if (i + 2 < log.size() && log[i] == "log GroupStart" &&
        absl::StartsWith(log[i + 1], "log AllGather") &&
        absl::StrContains(log[i + 1], "count=1 type=2") &&
        absl::StartsWith(log[i + 2], "log GroupEnd")) {
      ++*exchanges;
      i += 2;
      continue;
    }
    out.push_back(log[i]);
  }
  return out;
}

uint64_t FakeUniqueIdHash(int n) {
  char id[128] = {};
  std::snprintf(id, sizeof(id), "fake-unique-id-%d", n);
  return CommIdFromUniqueId(id, sizeof(id));
}

class InterposerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    app_ = Abs("FAKE_NCCL_APP");
    preload_ = Abs("FALCON_NCCL_SO");
    ASSERT_FALSE(app_.empty());
    ASSERT_FALSE(preload_.empty());
    socket_ = TestSocketPath("nccl_agent.sock");
    // What the application computes without the interposer.
    Child baseline(app_, {}, {});
    ASSERT_EQ(baseline.Finish(), 0);
    baseline_results_ = baseline.LinesWithPrefix("result ");
    baseline_log_ = baseline.LinesWithPrefix("log ");
    ASSERT_EQ(baseline_results_.size(), 30u);
  }

  std::vector<std::string> Env(bool profiling, int exit_flush_ms = 10000) const {
    std::vector<std::string> env = {
        "LD_PRELOAD=" + preload_, "FALCON_AGENT_SOCKET=" + socket_,
        "FALCON_JOB=nccljob",     "FALCON_RANK=1",
        "FALCON_WORLD_SIZE=4",    absl::StrCat("FALCON_SHIM_EXIT_FLUSH_MS=", exit_flush_ms)};
    if (profiling) env.push_back("FALCON_PROFILING=1");
    return env;
  }

  void ExpectUnchanged(const Child& run, int expected_exchanges) {
    EXPECT_EQ(run.LinesWithPrefix("result "), baseline_results_) << "results must not change";
    int exchanges = 0;
    EXPECT_EQ(WithoutExchanges(run.LinesWithPrefix("log "), &exchanges), baseline_log_)
        << "NCCL must see exactly the application's calls";
    EXPECT_EQ(exchanges, expected_exchanges);
  }

  std::string app_, preload_, socket_;
  std::vector<std::string> baseline_results_, baseline_log_;
};

struct Expected {
  falcon::v1::OpKind kind;
  char comm;  // W world, S split child, C config comm
  uint64_t bytes;
  int32_t peer;
};

const Expected kIteration[] = {
    {falcon::v1::OP_KIND_ALL_REDUCE, 'W', 1024 * 4, -1},
    {falcon::v1::OP_KIND_ALL_GATHER, 'S', 256 * 4, -1},
    {falcon::v1::OP_KIND_REDUCE_SCATTER, 'W', 128 * 4 * 4, -1},
    {falcon::v1::OP_KIND_BROADCAST, 'W', 64 * 8, -1},
    {falcon::v1::OP_KIND_REDUCE, 'C', 32 * 8, -1},
    {falcon::v1::OP_KIND_SEND, 'W', 100 * 4, 2},  // comm peer 2 -> global 2
    {falcon::v1::OP_KIND_RECV, 'W', 100 * 4, 0},  // comm peer 0 -> global 0
};

TEST_F(InterposerTest, RecordsEveryOpInOrderAndHoldsAtAPauseWithoutChangingResults) {
  auto agent = FakeAgent::Start(socket_);
  ASSERT_TRUE(agent.ok());
  Child run(app_, {"pause"}, Env(/*profiling=*/true));
  std::string line;
  while (run.ReadLine(&line) && line != "ready") {
  }
  ASSERT_EQ(line, "ready");
  ASSERT_TRUE((*agent)->WaitFor([&] { return (*agent)->hellos().size() == 1; }));
  const int64_t before_pause_ns = MonotonicNs();

  // Pause the job; the rank holds at its next safe point (the next op).
  falcon::v1::Directive pause;
  pause.set_directive_id(1);
  pause.set_job("nccljob");
  pause.set_effective_iteration(0);
  pause.mutable_pause()->set_max_duration_ns(120'000'000'000);
  auto has_ack = [&](uint64_t id, falcon::v1::AckStatus status) {
    for (const auto& a : (*agent)->acks()) {
      if (a.directive_id() == id && a.status() == status) return true;
    }
    return false;
  };
  ASSERT_TRUE((*agent)->SendDirective(pause));
  ASSERT_TRUE((*agent)->WaitFor([&] { return has_ack(1, falcon::v1::ACK_STATUS_RECEIVED); }));
  run.WriteLine("go");
  ASSERT_TRUE((*agent)->WaitFor([&] { return has_ack(1, falcon::v1::ACK_STATUS_APPLIED); }));
  const int64_t resume_ns = MonotonicNs();
  falcon::v1::Directive resume = pause;
  resume.set_directive_id(2);
  resume.mutable_resume();
  ASSERT_TRUE((*agent)->SendDirective(resume));
  ASSERT_EQ(run.Finish(), 0);
  ExpectUnchanged(run, /*expected_exchanges=*/3);
  EXPECT_TRUE(has_ack(2, falcon::v1::ACK_STATUS_APPLIED));

  // Identity and communicators.
  ASSERT_EQ((*agent)->hellos().size(), 1u);
  EXPECT_EQ((*agent)->hellos()[0].job(), "nccljob");
  EXPECT_EQ((*agent)->hellos()[0].rank().rank(), 1u);
  EXPECT_EQ((*agent)->hellos()[0].world_size(), 4u);
  EXPECT_EQ((*agent)->hellos()[0].rank().gpu(), 0);
  const uint64_t world_id = FakeUniqueIdHash(0);
  const uint64_t sub_id = SplitCommId(world_id, 0, /*color=*/1);
  const uint64_t cfg_id = FakeUniqueIdHash(1);
  std::map<uint64_t, std::vector<uint32_t>> members;
  for (const auto& c : (*agent)->communicators()) {
    members[c.comm_id()] = {c.member_ranks().begin(), c.member_ranks().end()};
    if (c.comm_id() == world_id) {
      EXPECT_EQ(c.kind(), falcon::v1::COMM_KIND_WORLD);
    }
  }
  EXPECT_EQ(members.size(), 3u);
  EXPECT_EQ(members[world_id], (std::vector<uint32_t>{0, 1, 2, 3}));
  EXPECT_EQ(members[sub_id], (std::vector<uint32_t>{1, 2})) << "learned by the all-gather";
  EXPECT_EQ(members[cfg_id], (std::vector<uint32_t>{0, 1}));

  // Every op, in call order, with its comm, size, peer and timing.
  ASSERT_TRUE((*agent)->WaitFor([&] { return (*agent)->acked_records().size() == 35; }));
  const std::vector<OpRecord> records = (*agent)->acked_records();
  const std::map<char, uint64_t> ids = {{'W', world_id}, {'S', sub_id}, {'C', cfg_id}};
  for (size_t i = 0; i < records.size(); ++i) {
    const OpRecord& r = records[i];
    const Expected& e = kIteration[i % 7];
    SCOPED_TRACE(absl::StrCat("record ", i));
    EXPECT_EQ(r.seq(), i + 1);
    EXPECT_EQ(r.op_kind(), e.kind);
    EXPECT_EQ(r.comm_id(), ids.at(e.comm));
    EXPECT_EQ(r.bytes(), e.bytes);
    EXPECT_EQ(r.peer(), e.peer);
    EXPECT_LE(r.host_start_ns(), r.host_end_ns());
    if (i > 0) {
      EXPECT_GE(r.host_start_ns(), records[i - 1].host_start_ns());
    }
    // Fake events: 0.25 ms per event recorded in between (grouped ops interleave).
    EXPECT_EQ(r.device_duration_ns(), i % 7 >= 5 ? 500'000 : 250'000);
    if (i < 21) {
      EXPECT_LT(r.host_end_ns(), before_pause_ns) << "before the pause";
    } else {
      EXPECT_GT(r.host_start_ns(), resume_ns) << "held until the resume";
    }
  }
  // The grouped Send/Recv complete together, when the group is launched.
  for (size_t i = 5; i < records.size(); i += 7) {
    EXPECT_EQ(records[i].host_end_ns(), records[i + 1].host_end_ns());
  }
}

TEST_F(InterposerTest, WithoutProfilingOnlyHostTime) {
  auto agent = FakeAgent::Start(socket_);
  ASSERT_TRUE(agent.ok());
  Child run(app_, {}, Env(/*profiling=*/false));
  ASSERT_EQ(run.Finish(), 0);
  ExpectUnchanged(run, 3);
  ASSERT_TRUE((*agent)->WaitFor([&] { return (*agent)->acked_records().size() == 35; }));
  for (const OpRecord& r : (*agent)->acked_records()) EXPECT_EQ(r.device_duration_ns(), 0);
}

TEST_F(InterposerTest, DisabledIsAPurePassThrough) {
  std::vector<std::string> env = Env(true);
  env.push_back("FALCON_NCCL_DISABLE=1");
  Child run(app_, {}, env);
  ASSERT_EQ(run.Finish(), 0);
  ExpectUnchanged(run, /*expected_exchanges=*/0);
}

TEST_F(InterposerTest, MembershipExchangeCanBeTurnedOff) {
  auto agent = FakeAgent::Start(socket_);
  ASSERT_TRUE(agent.ok());
  std::vector<std::string> env = Env(false);
  env.push_back("FALCON_NCCL_MEMBERSHIP=0");
  Child run(app_, {}, env);
  ASSERT_EQ(run.Finish(), 0);
  ExpectUnchanged(run, /*expected_exchanges=*/0);
  ASSERT_TRUE((*agent)->WaitFor([&] { return (*agent)->acked_records().size() == 35; }));
  // Only the world comm can be registered without an exchange (its ranks are the global ranks).
  ASSERT_EQ((*agent)->communicators().size(), 1u);
  EXPECT_EQ((*agent)->communicators()[0].comm_id(), FakeUniqueIdHash(0));
}

// A trainer that starts its own session after NCCL's first communicators (falcon.init after
// PyTorch's eager init_process_group): the interposer uses that session, so the agent hears one
// hello with the trainer's layout, and registers the communicators made before it.
TEST_F(InterposerTest, UsesTheTrainersSessionStartedAfterTheFirstCommunicators) {
  auto agent = FakeAgent::Start(socket_);
  ASSERT_TRUE(agent.ok());
  Child run(app_, {"session"}, Env(/*profiling=*/false));
  ASSERT_EQ(run.Finish(), 0);
  ASSERT_EQ(run.LinesWithPrefix("session "), std::vector<std::string>{"session 0"})
      << "the trainer's falcon_shim_init must find no session running";
  ExpectUnchanged(run, 3);
  ASSERT_TRUE((*agent)->WaitFor([&] { return (*agent)->acked_records().size() == 35; }));
  ASSERT_EQ((*agent)->hellos().size(), 1u);
  const falcon::v1::ShimHello& hello = (*agent)->hellos()[0];
  EXPECT_EQ(hello.rank().rank(), 1u);
  EXPECT_EQ(hello.rank().dp_index(), 1);
  EXPECT_EQ(hello.dp_size(), 2u);
  EXPECT_EQ(hello.pp_size(), 2u);
  EXPECT_EQ(hello.global_micro_batches(), 8u);
  std::map<uint64_t, std::vector<uint32_t>> members;
  for (const auto& c : (*agent)->communicators()) {
    members[c.comm_id()] = {c.member_ranks().begin(), c.member_ranks().end()};
  }
  const uint64_t world_id = FakeUniqueIdHash(0);
  EXPECT_EQ(members.size(), 3u);
  EXPECT_EQ(members[world_id], (std::vector<uint32_t>{0, 1, 2, 3}));
  EXPECT_EQ(members[SplitCommId(world_id, 0, /*color=*/1)], (std::vector<uint32_t>{1, 2}));
  EXPECT_EQ(members[FakeUniqueIdHash(1)], (std::vector<uint32_t>{0, 1}));
  for (const OpRecord& r : (*agent)->acked_records()) {
    EXPECT_TRUE(members.count(r.comm_id())) << "an op on an unregistered comm " << r.comm_id();
  }
}

// The trainer closes its session while the GPU still runs the last op (its end event not
// complete): the interposer hands that op over before the shim stops, with host timing only.
TEST_F(InterposerTest, AnOpPendingDeviceTimeWhenTheTrainerClosesItsSessionIsNotLost) {
  auto agent = FakeAgent::Start(socket_);
  ASSERT_TRUE(agent.ok());
  std::vector<std::string> env = Env(/*profiling=*/true);
  env.push_back("FAKE_CUDA_LAST_EVENT_PENDING=1");
  Child run(app_, {"session"}, env);
  ASSERT_EQ(run.Finish(), 0);
  EXPECT_EQ(run.LinesWithPrefix("shutdown "), std::vector<std::string>{"shutdown 0"});
  ExpectUnchanged(run, 3);
  ASSERT_TRUE((*agent)->WaitFor([&] { return (*agent)->acked_records().size() == 35; }))
      << (*agent)->acked_records().size() << " of 35 records";
  int device_timed = 0;
  for (const OpRecord& r : (*agent)->acked_records()) device_timed += r.device_duration_ns() > 0;
  EXPECT_EQ(device_timed, 34) << "all but the op still running at the close";
}

TEST_F(InterposerTest, NoAgentChangesNothing) {
  Child run(app_, {}, Env(true, /*exit_flush_ms=*/100));  // Nobody listens on the socket.
  ASSERT_EQ(run.Finish(), 0);
  ExpectUnchanged(run, 3);
}

}  // namespace
}  // namespace falcon::trainer_shim::nccl
