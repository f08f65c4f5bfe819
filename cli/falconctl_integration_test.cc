// The real falconctl binary against the real falcon_controller binary (a child process with
// RocksDB under $TEST_TMPDIR) on loopback. Four loopback agents register a DP=4 x PP=2 job
// (8 ranks, 4 nodes) and stream iteration summaries: healthy, then rank 5 computes 40% slower
// (the others wait for it), then healthy again. falconctl then lists and shows jobs, events (and
// watches one), the event's timeline, directives, settings (get, set, a bad key and a bad value),
// exports the history as CSV and JSON, forces a validation, asks for a dry-run plan and lists the
// audit trail of the mutating calls; unknown
// job and event ids exit 1, a dead address exits 3, bad usage exits 2.
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/subprocess.h"
#include "controller/testing/job_fixtures.h"
#include "controller/testing/loopback_agent.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "proto/falcon/v1/control.grpc.pb.h"

extern char** environ;

namespace falcon::cli {
namespace {

using controller::testing::LoopbackAgent;

constexpr char kJob[] = "ctl-job";
constexpr uint32_t kSlowRank = 5;
constexpr int64_t kSlowFrom = 60;
constexpr int64_t kSlowUntil = 100;  // Exclusive: healthy again from here.

std::string Runfile(const std::string& path) {
  return absl::StrCat(std::getenv("TEST_SRCDIR"), "/", std::getenv("TEST_WORKSPACE"), "/", path);
}
std::string TmpDir() { return std::getenv("TEST_TMPDIR"); }

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

struct Result {
  int rc = -1;
  std::string out;
  std::string err;
};

// A child process with stdout/stderr in files `base`.out/.err.
struct Child {
  absl::StatusOr<common::Subprocess> proc = absl::UnknownError("not started");
  std::string base;
  std::string out() const { return ReadFile(base + ".out"); }
};

// Starts `argv`; `env` entries are added to the environment ($FALCON_CONTROLLER removed first).
Child Spawn(std::vector<std::string> argv, const std::vector<std::string>& env = {}) {
  static int n = 0;
  Child c;
  c.base = absl::StrCat(TmpDir(), "/run.", ++n);
  common::SpawnOptions options;
  options.argv = std::move(argv);
  options.env.emplace();
  for (char** e = environ; *e != nullptr; ++e) {
    if (!absl::StartsWith(*e, "FALCON_CONTROLLER=")) options.env->push_back(*e);
  }
  options.env->insert(options.env->end(), env.begin(), env.end());
  options.stdout_stream = common::Stdio::File(c.base + ".out");
  options.stderr_stream = common::Stdio::File(c.base + ".err");
  c.proc = common::Subprocess::Spawn(options);
  return c;
}

// Waits for `c` to exit; after `timeout` kills it (SIGKILL: rc 137).
Result Wait(Child& c, absl::Duration timeout = absl::Seconds(120)) {
  Result r;
  if (!c.proc.ok()) {
    r.err = c.proc.status().ToString();
    return r;
  }
  absl::StatusOr<std::optional<common::ExitStatus>> ended = c.proc->WaitFor(timeout);
  absl::StatusOr<common::ExitStatus> status = !ended.ok() ? ended.status()
                                              : ended->has_value()
                                                  ? absl::StatusOr<common::ExitStatus>(**ended)
                                                  : c.proc->Stop(SIGKILL, absl::ZeroDuration());
  r.out = ReadFile(c.base + ".out");
  r.err = ReadFile(c.base + ".err");
  if (!status.ok()) {
    r.err += status.status().ToString();
    return r;
  }
  r.rc = status->ShellCode();
  return r;
}

Result RunProcess(std::vector<std::string> argv, const std::vector<std::string>& env = {}) {
  Child c = Spawn(std::move(argv), env);
  return Wait(c);
}

std::ostream& operator<<(std::ostream& os, const Result& r) {
  return os << "rc=" << r.rc << "\n--- stdout\n" << r.out << "--- stderr\n" << r.err;
}

// The controller as a child process on 127.0.0.1:0.
class ControllerProcess {
 public:
  ~ControllerProcess() { Stop(); }

  ::testing::AssertionResult Start(const std::string& data_dir) {
    log_ = data_dir + ".log";
    std::vector<std::string> argv = {Runfile("controller/falcon_controller"),
                                     "--listen=127.0.0.1:0",
                                     "--plaintext",
                                     "--metrics_listen=127.0.0.1:0",
                                     absl::StrCat("--data_dir=", data_dir),
                                     "--tick=50ms",
                                     "--job_end_grace=600s"};
    common::SpawnOptions options;
    options.argv = argv;
    options.stdout_stream = common::Stdio::File(log_);
    options.stderr_stream = common::Stdio::SameAsStdout();
    absl::StatusOr<common::Subprocess> proc = common::Subprocess::Spawn(options);
    if (!proc.ok()) return ::testing::AssertionFailure() << proc.status();
    proc_ = std::move(*proc);
    const absl::Time deadline = absl::Now() + absl::Seconds(60);
    while (absl::Now() < deadline) {
      std::stringstream text(ReadFile(log_));
      std::string line;
      while (std::getline(text, line)) {
        if (absl::StartsWith(line, "listening on ")) {
          address_ = line.substr(13);
          return ::testing::AssertionSuccess();
        }
      }
      absl::StatusOr<std::optional<common::ExitStatus>> ended = proc_->Poll();
      if (!ended.ok() || ended->has_value()) {
        proc_.reset();
        return ::testing::AssertionFailure() << "controller ended:\n" << ReadFile(log_);
      }
      absl::SleepFor(absl::Milliseconds(20));
    }
    return ::testing::AssertionFailure() << "controller did not start:\n" << ReadFile(log_);
  }

  // SIGTERM, SIGKILL after 10 s.
  void Stop() {
    if (!proc_.has_value()) return;
    absl::StatusOr<common::ExitStatus> ended = proc_->Stop(SIGTERM, absl::Seconds(10));
    EXPECT_TRUE(ended.ok()) << ended.status();
    proc_.reset();
  }

  const std::string& address() const { return address_; }
  std::string log() const { return ReadFile(log_); }

 private:
  std::optional<common::Subprocess> proc_;
  std::string log_;
  std::string address_;
};

// 100 ms +-1% noise that differs per rank and iteration, deterministic.
int64_t Healthy(uint32_t rank, int64_t i) {
  return 100'000'000 + static_cast<int64_t>(((rank * 7919 + i * 104729) % 201) - 100) * 10'000;
}
bool Slow(int64_t i) { return i >= kSlowFrom && i < kSlowUntil; }

class FalconctlTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    controller_ = new ControllerProcess();
    ASSERT_TRUE(controller_->Start(TmpDir() + "/controller-data"));
    spec_.job = kJob;
    spec_.dp = 4;
    spec_.pp = 2;
    spec_.ranks_per_node = 2;
    agents_ = new std::vector<std::unique_ptr<LoopbackAgent>>();
    for (uint32_t n = 0; n < controller::testing::NodeCount(spec_); ++n) {
      agents_->push_back(std::make_unique<LoopbackAgent>(
          controller::testing::NodeName(n), controller::testing::NodeName(n),
          controller::testing::RanksOfNode(spec_, n),
          std::vector<falcon::v1::JobRegistration>{
              controller::testing::NodeRegistration(spec_, n)}));
      ASSERT_TRUE(agents_->back()->Connect(controller_->address(), absl::Seconds(20)).ok());
    }
    control_ = falcon::v1::Control::NewStub(
                   grpc::CreateChannel(controller_->address(), grpc::InsecureChannelCredentials()))
                   .release();
  }
  static void TearDownTestSuite() {
    delete control_;
    control_ = nullptr;
    delete agents_;
    agents_ = nullptr;
    delete controller_;
    controller_ = nullptr;
  }

  static falcon::v1::Job GetJob() {
    grpc::ClientContext ctx;
    falcon::v1::GetJobRequest req;
    req.set_job(kJob);
    falcon::v1::Job job;
    control_->GetJob(&ctx, req, &job);
    return job;
  }

  static void WaitNotValidating() {
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (GetJob().state() == falcon::v1::JOB_STATE_VALIDATING && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(5));
    }
  }

  // Streams iterations [from, to): rank 5 slow (everyone waiting for it) while Slow(i).
  static void Feed(int64_t from, int64_t to) {
    for (int64_t i = from; i < to; ++i) {
      controller::testing::Responder responder;
      responder.gemm_ns = [i](uint32_t r) {
        return r == kSlowRank && Slow(i) ? 1'400'000 : 1'000'000;
      };
      for (auto& a : *agents_) a->set_responder(responder);
      for (auto& a : *agents_) {
        falcon::v1::TelemetryBatch b;
        b.set_job(kJob);
        for (uint32_t r : a->ranks()) {
          const int64_t t = Slow(i) ? Healthy(0, i) * 14 / 10 : Healthy(r, i);
          // The healthy split of compute and communication, plus what the slow rank adds (a
          // slowdown of every rank's compute would be an environment shift: no event).
          falcon::v1::IterationSummary s =
              controller::testing::MakeSummary(spec_, r, i, Healthy(r, i));
          s.set_iteration_time_ns(t);
          if (Slow(i)) {
            const int64_t extra = Healthy(0, i) * 4 / 10;
            if (r == kSlowRank) {
              s.set_compute_ns(s.compute_ns() + extra);
            } else {
              for (auto& cs : *s.mutable_comms()) {
                if (cs.comm_id() == 1001) {
                  cs.set_wait_ns(cs.wait_ns() + extra);
                  cs.set_busy_ns(cs.busy_ns() + extra);
                }
              }
              if (r / spec_.dp != 1) s.set_compute_ns(s.compute_ns() + extra);
            }
          }
          *b.add_iterations() = s;
        }
        a->Send(b);
      }
      for (auto& a : *agents_) ASSERT_TRUE(a->WaitAcked(absl::Seconds(30)).ok());
      WaitNotValidating();
    }
  }

  static Result Ctl(std::vector<std::string> args) {
    const std::string shown = absl::StrJoin(args, " ");
    args.insert(args.begin(),
                {Runfile("cli/falconctl"), "--plaintext", "--controller", controller_->address()});
    Result r = RunProcess(args);
    // A transcript for the README's examples (bazel-testlogs/.../test.outputs/transcript.txt).
    if (const char* dir = std::getenv("TEST_UNDECLARED_OUTPUTS_DIR"); dir != nullptr) {
      std::ofstream t(absl::StrCat(dir, "/transcript.txt"), std::ios::app);
      t << "$ falconctl " << shown << "\n" << r.out << r.err << "[exit " << r.rc << "]\n\n";
    }
    return r;
  }

  static nlohmann::json Json(const Result& r) {
    auto j = nlohmann::json::parse(r.out, nullptr, /*allow_exceptions=*/false);
    EXPECT_FALSE(j.is_discarded()) << r;
    return j;
  }

  static ControllerProcess* controller_;
  static controller::testing::LayoutSpec spec_;
  static std::vector<std::unique_ptr<LoopbackAgent>>* agents_;
  static falcon::v1::Control::Stub* control_;
};

ControllerProcess* FalconctlTest::controller_ = nullptr;
controller::testing::LayoutSpec FalconctlTest::spec_;
std::vector<std::unique_ptr<LoopbackAgent>>* FalconctlTest::agents_ = nullptr;
falcon::v1::Control::Stub* FalconctlTest::control_ = nullptr;

TEST_F(FalconctlTest, UsageErrorsExitTwoAndDeadAddressExitsThree) {
  const std::string bin = Runfile("cli/falconctl");
  Result help = RunProcess({bin, "help"});
  EXPECT_EQ(help.rc, 0) << help;
  for (const char* command : {"jobs", "events", "event", "settings", "plan", "export"}) {
    EXPECT_TRUE(absl::StrContains(help.out, command)) << command << "\n" << help;
  }
  Result top = RunProcess({bin, "--help"});
  EXPECT_EQ(top.rc, 0) << top;
  EXPECT_EQ(top.out, help.out);
  Result events_help = RunProcess({bin, "events", "--help"});
  EXPECT_EQ(events_help.rc, 0) << events_help;
  EXPECT_TRUE(absl::StrContains(events_help.out, "Usage: falconctl events")) << events_help;
  EXPECT_TRUE(absl::StrContains(events_help.out, "--watch")) << events_help;
  Result bad_port = RunProcess({bin, "--controller", "127.0.0.1:70000", "jobs"});
  EXPECT_EQ(bad_port.rc, 2) << bad_port;
  EXPECT_TRUE(absl::StrContains(bad_port.err, "--controller")) << bad_port;

  Result unknown = RunProcess({bin, "frobnicate"});
  EXPECT_EQ(unknown.rc, 2) << unknown;
  EXPECT_TRUE(absl::StrContains(unknown.err, "frobnicate")) << unknown;
  Result flag = RunProcess({bin, "jobs", "--bogus"});
  EXPECT_EQ(flag.rc, 2) << flag;
  EXPECT_TRUE(absl::StrContains(flag.err, "--bogus")) << flag;
  Result missing = RunProcess({bin, "job"});
  EXPECT_EQ(missing.rc, 2) << missing;
  Result bad_id = RunProcess({bin, "event", "twelve"});
  EXPECT_EQ(bad_id.rc, 2) << bad_id;
  EXPECT_TRUE(absl::StrContains(bad_id.err, "twelve")) << bad_id;
  Result no_dry_run = RunProcess({bin, "plan", kJob});
  EXPECT_EQ(no_dry_run.rc, 2) << no_dry_run;
  EXPECT_TRUE(absl::StrContains(no_dry_run.err, "--dry-run")) << no_dry_run;

  // Nothing listens on port 1: unavailable, named, exit 3 (also through $FALCON_CONTROLLER).
  // TLS by default: the files, or --plaintext said explicitly.
  Result no_tls = RunProcess({bin, "--controller", "127.0.0.1:1", "jobs"});
  EXPECT_EQ(no_tls.rc, 2) << no_tls;
  EXPECT_TRUE(absl::StrContains(no_tls.err, "--tls_cert, --tls_key, --tls_ca: required")) << no_tls;
  Result dead =
      RunProcess({bin, "--plaintext", "--controller", "127.0.0.1:1", "--timeout", "5s", "jobs"});
  EXPECT_EQ(dead.rc, 3) << dead;
  EXPECT_TRUE(absl::StrContains(dead.err, "127.0.0.1:1")) << dead;
  Result dead_env = RunProcess({bin, "events", "--plaintext"}, {"FALCON_CONTROLLER=127.0.0.1:1"});
  EXPECT_EQ(dead_env.rc, 3) << dead_env;
  Result dead_watch =
      RunProcess({bin, "--plaintext", "--controller=127.0.0.1:1", "events", "--watch"});
  EXPECT_EQ(dead_watch.rc, 3) << dead_watch;
}

TEST_F(FalconctlTest, WholeStoryOfOneComputeFailSlow) {
  // A healthy job: listed, shown, no events; unknown names exit 1.
  Feed(0, kSlowFrom);
  Result jobs = Ctl({"jobs"});
  ASSERT_EQ(jobs.rc, 0) << jobs;
  EXPECT_TRUE(absl::StrContains(jobs.out, "JOB")) << jobs;
  EXPECT_TRUE(absl::StrContains(jobs.out, kJob)) << jobs;
  EXPECT_TRUE(absl::StrContains(jobs.out, "4x2x1")) << jobs;
  Result env_jobs = RunProcess({Runfile("cli/falconctl"), "jobs", "--json", "--plaintext"},
                               {absl::StrCat("FALCON_CONTROLLER=", controller_->address())});
  ASSERT_EQ(env_jobs.rc, 0) << env_jobs;
  nlohmann::json jobs_json = Json(env_jobs);
  ASSERT_EQ(jobs_json["jobs"].size(), 1u) << env_jobs;
  EXPECT_EQ(jobs_json["jobs"][0]["job"], kJob);
  EXPECT_EQ(jobs_json["jobs"][0]["world_size"], 8);
  EXPECT_EQ(jobs_json["jobs"][0]["last_iteration"], kSlowFrom - 1);

  Result job = Ctl({"job", kJob});
  ASSERT_EQ(job.rc, 0) << job;
  EXPECT_TRUE(absl::StrContains(job.out, "dp 4 x pp 2")) << job;
  EXPECT_TRUE(absl::StrContains(job.out, "node-3")) << job;
  EXPECT_TRUE(absl::StrContains(job.out, "dp.pp1")) << job;
  Result no_job = Ctl({"job", "no-such-job"});
  EXPECT_EQ(no_job.rc, 1) << no_job;
  EXPECT_TRUE(absl::StrContains(no_job.err, "NOT_FOUND")) << no_job;
  Result no_events = Ctl({"events"});
  EXPECT_EQ(no_events.rc, 0) << no_events;
  EXPECT_TRUE(absl::StrContains(no_events.out, "no events")) << no_events;

  // Rank 5 slows down: one open event, replayed to a watcher.
  Feed(kSlowFrom, kSlowUntil);
  Result active = Ctl({"events", "--active", "--json"});
  ASSERT_EQ(active.rc, 0) << active << controller_->log();
  nlohmann::json active_json = Json(active);
  ASSERT_EQ(active_json["events"].size(), 1u) << active;
  const nlohmann::json& ev = active_json["events"][0];
  EXPECT_EQ(ev["cause"], "CAUSE_COMPUTE") << active;
  EXPECT_EQ(ev["ranks"], nlohmann::json::array({kSlowRank})) << active;
  const uint64_t event_id = ev["event_id"].get<uint64_t>();
  Result watch = Ctl({"events", "--watch", "--count", "1"});
  ASSERT_EQ(watch.rc, 0) << watch;
  EXPECT_EQ(std::vector<std::string>(absl::StrSplit(watch.out, '\n', absl::SkipEmpty())).size(), 1u)
      << watch;
  EXPECT_TRUE(absl::StrContains(watch.out, absl::StrCat("event ", event_id))) << watch;
  EXPECT_TRUE(absl::StrContains(watch.out, "rank 5")) << watch;
  Result watch_json = Ctl({"events", "--watch", "--count=1", "--json", "--job", kJob});
  ASSERT_EQ(watch_json.rc, 0) << watch_json;
  EXPECT_EQ(Json(watch_json)["event_id"], event_id) << watch_json;

  // The controller cannot plan yet (UNIMPLEMENTED, exit 3, said plainly) or, once mitigation is
  // in, answers with the escalation ladder.
  Result plan = Ctl({"plan", kJob, "--dry-run"});
  if (plan.rc == 3) {
    EXPECT_TRUE(absl::StrContains(plan.err, "cannot plan")) << plan;
  } else {
    EXPECT_EQ(plan.rc, 0) << plan;
    EXPECT_TRUE(absl::StrContains(plan.out, "dry-run plan")) << plan;
  }

  // A hypothetical verdict is checked by the controller (a rank it does not know: exit 2, named).
  Result what_if = Ctl(
      {"plan", kJob, "--dry-run", "--cause", "compute", "--slow-ranks", "5", "--slowdown", "1.4"});
  EXPECT_TRUE(what_if.rc == 0 || what_if.rc == 3) << what_if;
  Result bad_rank = Ctl({"plan", kJob, "--dry-run", "--cause=compute", "--slow-ranks=99"});
  EXPECT_EQ(bad_rank.rc, 2) << bad_rank;
  EXPECT_TRUE(absl::StrContains(bad_rank.err, "slow_ranks[0]")) << bad_rank;

  // It recovers, while a watcher (subscribed: it printed the replayed open event) looks on.
  Child watcher =
      Spawn({Runfile("cli/falconctl"), "--plaintext", "--controller", controller_->address(),
             "events", "--watch", "--job", kJob, "--count", "2"});
  const absl::Time replayed_by = absl::Now() + absl::Seconds(60);
  while (!absl::StrContains(watcher.out(), "\n") && absl::Now() < replayed_by) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  Feed(kSlowUntil, kSlowUntil + 60);
  Result watched = Wait(watcher, absl::Seconds(60));
  ASSERT_EQ(watched.rc, 0) << watched;
  std::vector<std::string> watch_lines = absl::StrSplit(watched.out, '\n', absl::SkipEmpty());
  ASSERT_EQ(watch_lines.size(), 2u) << watched;
  EXPECT_TRUE(absl::StrContains(watch_lines[0], "localized") ||
              absl::StrContains(watch_lines[0], "mitigating"))
      << watched;
  EXPECT_TRUE(absl::StrContains(watch_lines[1], "recovered") ||
              absl::StrContains(watch_lines[1], "mitigating"))
      << watched;
  Result events = Ctl({"events"});
  ASSERT_EQ(events.rc, 0) << events;
  EXPECT_TRUE(absl::StrContains(events.out, "CULPRIT")) << events;
  EXPECT_TRUE(absl::StrContains(events.out, "compute")) << events;
  EXPECT_TRUE(absl::StrContains(events.out, "rank 5")) << events;
  Result event = Ctl({"event", absl::StrCat(event_id)});
  ASSERT_EQ(event.rc, 0) << event;
  for (const char* part : {"timeline:", "onset", "alarm", "verdict", "recovery", "healthy", "lost",
                           "transitions:", "localized"}) {
    EXPECT_TRUE(absl::StrContains(event.out, part)) << part << "\n" << event;
  }
  Result event_json = Ctl({"event", absl::StrCat(event_id), "--json"});
  ASSERT_EQ(event_json.rc, 0) << event_json;
  nlohmann::json e = Json(event_json);
  EXPECT_EQ(e["state"], "EVENT_STATE_RECOVERED") << event_json;
  EXPECT_NEAR(e["onset_iteration"].get<int64_t>(), kSlowFrom, 3) << event_json;
  EXPECT_NEAR(e["recovery_iteration"].get<int64_t>(), kSlowUntil, 5) << event_json;
  EXPECT_GT(e["lost_seconds"].get<double>(), 0) << event_json;
  Result no_event = Ctl({"event", "987654"});
  EXPECT_EQ(no_event.rc, 1) << no_event;

  // History with event marks.
  Result csv = Ctl({"export", kJob, "--csv"});
  ASSERT_EQ(csv.rc, 0) << csv;
  std::vector<std::string> lines = absl::StrSplit(csv.out, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), static_cast<size_t>(kSlowUntil + 60 + 1)) << csv;
  EXPECT_EQ(lines[0], "iteration,time_ns,iteration_time_s,plan_version,event_id,mark");
  int onset_rows = 0, recovery_rows = 0;
  for (const auto& line : lines) {
    std::vector<std::string> cells = absl::StrSplit(line, ',');
    ASSERT_EQ(cells.size(), 6u) << line;
    if (absl::StrContains(cells[5], "onset")) {
      ++onset_rows;
      EXPECT_EQ(cells[4].substr(0, cells[4].find(';')), absl::StrCat(event_id)) << line;
      EXPECT_NEAR(std::stoll(cells[0]), kSlowFrom, 3) << line;
    }
    if (absl::StrContains(cells[5], "recovery")) ++recovery_rows;
  }
  EXPECT_EQ(onset_rows, 1) << csv;
  EXPECT_EQ(recovery_rows, 1) << csv;
  const std::string out_path = TmpDir() + "/history.csv";
  Result to_file = Ctl({"export", kJob, "--out", out_path});
  ASSERT_EQ(to_file.rc, 0) << to_file;
  EXPECT_EQ(ReadFile(out_path), csv.out);
  Result hist_json = Ctl({"--json", "export", kJob});
  ASSERT_EQ(hist_json.rc, 0) << hist_json;
  EXPECT_EQ(Json(hist_json)["points"].size(), static_cast<size_t>(kSlowUntil + 60));
  EXPECT_EQ(Ctl({"export", "no-such-job"}).rc, 1);

  // Settings: get, set two keys, read them back; a bad key or value exits 2 naming it, before or
  // from the controller.
  Result get = Ctl({"settings", "get", kJob});
  ASSERT_EQ(get.rc, 0) << get;
  EXPECT_TRUE(absl::StrContains(get.out, "s2_cost_iterations")) << get;
  Result set = Ctl({"settings", "set", kJob, "s2_cost_iterations=8", "dry_run=true"});
  ASSERT_EQ(set.rc, 0) << set;
  Result get_json = Ctl({"settings", "get", kJob, "--json"});
  ASSERT_EQ(get_json.rc, 0) << get_json;
  nlohmann::json settings = Json(get_json);
  EXPECT_EQ(settings["s2_cost_iterations"], 8.0) << get_json;
  EXPECT_EQ(settings["dry_run"], true) << get_json;
  Result bad_key = Ctl({"settings", "set", kJob, "turbo=1"});
  EXPECT_EQ(bad_key.rc, 2) << bad_key;
  EXPECT_TRUE(absl::StrContains(bad_key.err, "turbo")) << bad_key;
  Result bad_value = Ctl({"settings", "set", kJob, "hazard=lots"});
  EXPECT_EQ(bad_value.rc, 2) << bad_value;
  EXPECT_TRUE(absl::StrContains(bad_value.err, "hazard")) << bad_value;
  Result out_of_range = Ctl({"settings", "set", kJob, "hazard=5"});
  EXPECT_EQ(out_of_range.rc, 2) << out_of_range;
  EXPECT_TRUE(absl::StrContains(out_of_range.err, "hazard")) << out_of_range;
  EXPECT_TRUE(absl::StrContains(out_of_range.err, "INVALID_ARGUMENT")) << out_of_range;
  Result defaults = Ctl({"settings", "get"});
  EXPECT_EQ(defaults.rc, 0) << defaults;
  EXPECT_TRUE(absl::StrContains(defaults.out, "defaults for new jobs")) << defaults;

  // A forced validation; then every directive with its acks.
  Result validate = Ctl({"validate", kJob});
  ASSERT_EQ(validate.rc, 0) << validate;
  EXPECT_TRUE(absl::StrContains(validate.out, "validation started")) << validate;
  Feed(kSlowUntil + 60, kSlowUntil + 65);
  Result directives = Ctl({"directives", "--job", kJob});
  ASSERT_EQ(directives.rc, 0) << directives;
  Result directives_json = Ctl({"directives", "--json"});
  ASSERT_EQ(directives_json.rc, 0) << directives_json;
  nlohmann::json d = Json(directives_json);
  ASSERT_TRUE(d["directives"].is_array()) << directives_json;
  if (d["directives"].empty()) {
    EXPECT_TRUE(absl::StrContains(directives.out, "no directives")) << directives;
  } else {
    EXPECT_TRUE(absl::StrContains(directives.out, "ACKS")) << directives;
    for (const auto& r : d["directives"]) {
      EXPECT_EQ(r["directive"]["job"], kJob);
      EXPECT_TRUE(absl::StrContains(r["acks_summary"].get<std::string>(), "/"));
    }
  }
  EXPECT_EQ(Ctl({"directives", "--job", "no-such-job"}).rc, 1);
  EXPECT_EQ(Ctl({"validate", "no-such-job"}).rc, 1);
  EXPECT_EQ(Ctl({"plan", "no-such-job", "--dry-run"}).rc, 1);
  // The audit trail: every mutating call, refused ones too, newest first; a plaintext controller
  // audits its callers as "plaintext" operators.
  Result audit = Ctl({"audit"});
  ASSERT_EQ(audit.rc, 0) << audit;
  EXPECT_TRUE(absl::StrContains(audit.out, "IDENTITY")) << audit;
  EXPECT_TRUE(absl::StrContains(audit.out, "plaintext")) << audit;
  Result audit_json = Ctl({"audit", "--json"});
  ASSERT_EQ(audit_json.rc, 0) << audit_json;
  nlohmann::json trail = Json(audit_json)["audit"];
  ASSERT_TRUE(trail.is_array()) << audit_json;
  ASSERT_GE(trail.size(), 4u) << audit_json;  // Two settings sets, two validations at least.
  EXPECT_EQ(trail[0]["method"], "ForceValidation") << audit_json;
  EXPECT_TRUE(absl::StrContains(trail[0]["result"].get<std::string>(), "no-such-job"))
      << audit_json;
  EXPECT_EQ(trail[1]["method"], "ForceValidation") << audit_json;
  EXPECT_EQ(trail[1]["result"], "OK") << audit_json;
  EXPECT_EQ(trail[1]["identity"], "plaintext") << audit_json;
  EXPECT_EQ(trail[1]["role"], "operator") << audit_json;
  bool set_seen = false;
  for (const auto& r : trail) {
    if (r["method"] == "SetSettings" && r["result"] == "OK") {
      set_seen = absl::StrContains(r["request"].get<std::string>(), "s2_cost_iterations: 8");
    }
  }
  EXPECT_TRUE(set_seen) << audit_json;
  Result one = Ctl({"audit", "--limit", "1", "--json"});
  ASSERT_EQ(one.rc, 0) << one;
  EXPECT_EQ(Json(one)["audit"].size(), 1u) << one;

  Result no_job_events = Ctl({"events", "--job", "no-such-job"});
  EXPECT_EQ(no_job_events.rc, 1) << no_job_events;
  EXPECT_TRUE(absl::StrContains(no_job_events.err, "unknown job 'no-such-job'")) << no_job_events;
}

// A controller whose jobs together pass gRPC's 4 MiB default message size (80 jobs of 1024
// ranks): falconctl pages through them, so `jobs` lists every one (an unpaged ListJobs reply was
// refused by the client: RESOURCE_EXHAUSTED, exit 3).
TEST(FalconctlPagingTest, JobsListsEveryJobPastTheMessageSizeLimit) {
  ControllerProcess controller;
  ASSERT_TRUE(controller.Start(TmpDir() + "/paging-data"));
  std::vector<std::unique_ptr<LoopbackAgent>> agents;
  for (int a = 0; a < 2; ++a) {
    std::vector<falcon::v1::JobRegistration> jobs;
    for (int j = 0; j < 40; ++j) {
      falcon::v1::JobRegistration reg;
      reg.set_job(absl::StrCat("paged-", a, "-", j));
      reg.set_world_size(1024);
      reg.set_epoch(1);
      for (uint32_t r = 0; r < 1024; ++r) {
        falcon::v1::RankInfo* info = reg.add_ranks();
        info->set_rank(r);
        info->set_node(absl::StrCat("node-", a));
        info->set_local_rank(r);
        info->set_gpu(-1);
        info->set_pid(static_cast<int32_t>(10000 + r));
        info->set_dp_index(-1);
        info->set_pp_index(-1);
        info->set_tp_index(-1);
      }
      jobs.push_back(std::move(reg));
    }
    agents.push_back(std::make_unique<LoopbackAgent>(absl::StrCat("node-", a),
                                                     absl::StrCat("node-", a),
                                                     std::vector<uint32_t>{}, std::move(jobs)));
    ASSERT_TRUE(agents.back()->Connect(controller.address(), absl::Seconds(60)).ok());
  }
  // Together the jobs are larger than one reply may be.
  auto control = falcon::v1::Control::NewStub(
      grpc::CreateChannel(controller.address(), grpc::InsecureChannelCredentials()));
  size_t bytes = 0;
  falcon::v1::ListJobsRequest req;
  for (;;) {
    grpc::ClientContext ctx;
    falcon::v1::ListJobsResponse page;
    grpc::Status s = control->ListJobs(&ctx, req, &page);
    ASSERT_TRUE(s.ok()) << s.error_message();
    for (const auto& j : page.jobs()) bytes += j.ByteSizeLong();
    if (page.next_page_token().empty()) break;
    req.set_page_token(page.next_page_token());
  }
  EXPECT_GT(bytes, size_t{4} << 20);

  Result jobs = RunProcess({Runfile("cli/falconctl"), "--plaintext", "--controller",
                            controller.address(), "jobs", "--json"});
  ASSERT_EQ(jobs.rc, 0) << jobs.err;
  nlohmann::json j = nlohmann::json::parse(jobs.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << jobs.err;
  ASSERT_EQ(j["jobs"].size(), 80u);
  EXPECT_EQ(j["jobs"][0]["job"], "paged-0-0");
  EXPECT_EQ(j["jobs"][79]["job"], "paged-1-9");
  Result table = RunProcess(
      {Runfile("cli/falconctl"), "--plaintext", "--controller", controller.address(), "jobs"});
  ASSERT_EQ(table.rc, 0) << table.err;
  EXPECT_TRUE(absl::StrContains(table.out, "paged-1-39"));
}

}  // namespace
}  // namespace falcon::cli
