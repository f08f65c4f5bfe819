// End to end: the falcon_train binary as `./falcon train` runs it (launcher + rank processes).
#include <dirent.h>
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/subprocess.h"
#include "common/testing/run_binary.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "trainer/testing/job.h"

namespace falcon::trainer {
namespace {

using ::testing::HasSubstr;

struct Outcome {
  int exit_code = -1;
  std::string output;  // stdout + stderr
};

// Runs falcon_train with `args` (small model flags added) from a fresh directory.
Outcome Train(const std::string& args, const std::string& dir) {
  const std::string binary =
      absl::StrCat(std::getenv("TEST_SRCDIR"), "/falcon/trainer/falcon_train");
  const std::string out = dir + "/output.txt";
  const std::string cmd =
      absl::StrCat("cd ", dir, " && ", binary,
                   " --hidden 32 --ffn 64 --batch 8 --embed 8 --context 4 --print_every 0 ", args,
                   " > ", out, " 2>&1");
  const int status = std::system(cmd.c_str());
  Outcome o;
  o.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream in(out);
  std::ostringstream text;
  text << in.rdbuf();
  o.output = text.str();
  return o;
}

TEST(TrainMainTest, BadLayoutsAndBatchesAreClearErrors) {
  const std::string dir = common::testing::FreshDir("errors");
  Outcome o = Train("--dp 3 --pp 2 --nproc 8 --micro-batches 8 --steps 1", dir);
  EXPECT_EQ(o.exit_code, 2);
  EXPECT_THAT(o.output, HasSubstr("--dp 3 x --pp 2 = 6 ranks does not divide the world size 8"));
  o = Train("--dp 2 --pp 2 --micro-batches 7 --steps 1", dir);
  EXPECT_EQ(o.exit_code, 2);
  EXPECT_THAT(o.output, HasSubstr("--micro-batches 7 is not a positive multiple of --pp 2"));
  o = Train("--dp 1 --pp 4 --layers 2 --micro-batches 4 --steps 1", dir);
  EXPECT_EQ(o.exit_code, 2);
  EXPECT_THAT(o.output, HasSubstr("--pp 4 exceeds --layers 2"));
  o = Train("--dp 1 --pp 1 --micro-batches 1 --steps 1 --data /nonexistent.txt", dir);
  EXPECT_EQ(o.exit_code, 2);
  EXPECT_THAT(o.output, HasSubstr("cannot open training text '/nonexistent.txt'"));
  o = Train("--dp 1 --pp 1 --micro-batches 1 --steps 1 --faults 'compute:rank=0'", dir);
  EXPECT_EQ(o.exit_code, 2);
  EXPECT_THAT(o.output, HasSubstr("--faults"));
}

TEST(TrainMainTest, BadFalconFlagsAreClearErrors) {
  const std::string dir = common::testing::FreshDir("falcon_flags");
  const std::string base = "--dp 1 --pp 1 --micro-batches 1 --steps 1 ";
  Outcome o = Train(base + "--job 'a b'", dir);
  EXPECT_EQ(o.exit_code, 2);
  EXPECT_THAT(o.output, HasSubstr("--job: 'a b' is not 1 to 128 bytes of [A-Za-z0-9._-]"));
  o = Train(base + "--emulated_compute_ms -1", dir);
  EXPECT_EQ(o.exit_code, 2);
  EXPECT_THAT(o.output, HasSubstr("--emulated_compute_ms -1: need a number in [0, 10000]"));
  o = Train(base + "--emulated_gemm_ms -3", dir);
  EXPECT_EQ(o.exit_code, 2);
  EXPECT_THAT(o.output, HasSubstr("--emulated_gemm_ms -3: need -1 or a number in [0, 10000]"));
  o = Train(base + "--emulated_link_ms 20000", dir);
  EXPECT_EQ(o.exit_code, 2);
  EXPECT_THAT(o.output, HasSubstr("--emulated_link_ms 20000: need -1 or a number in [0, 10000]"));
  o = Train(base + "--agent_socket /tmp/{rank}.sock", dir);
  EXPECT_EQ(o.exit_code, 2);
  EXPECT_THAT(o.output, HasSubstr("the only placeholder is {node}"));
  o = Train(base + "--agent_socket /tmp/" + std::string(120, 'x'), dir);
  EXPECT_EQ(o.exit_code, 2);
  EXPECT_THAT(o.output, HasSubstr("must be < 108 bytes"));
  o = Train(base + "--agent_socket /tmp/a.sock --directives x.jsonl", dir);
  EXPECT_EQ(o.exit_code, 2);
  EXPECT_THAT(o.output, HasSubstr("exclude each other"));
}

// The shim never stops training: with the agent's socket missing, records are buffered (and the
// oldest dropped) and the job finishes; the emulated compute shows in compute_s.
TEST(TrainMainTest, TrainsWithTheShimWhenTheAgentIsAbsent) {
  const std::string dir = common::testing::FreshDir("absent_agent");
  Outcome o = Train(
      absl::StrCat("--dp 2 --pp 2 --nodes 2 --micro-batches 4 --steps 3 --job j1 ",
                   "--emulated_compute_ms 5 --agent_socket /tmp/falcon-absent-agent-{node}.sock ",
                   "--json_log ", dir, "/log.jsonl"),
      dir);
  ASSERT_EQ(o.exit_code, 0) << o.output;
  const std::vector<nlohmann::json> log = testing::ReadJsonLines(dir + "/log.jsonl");
  ASSERT_EQ(log.size(), 12u) << o.output;
  for (const nlohmann::json& line : log) {
    // 2 micro-batches per stage: 2 x (5 ms forward + 10 ms backward) slept.
    EXPECT_GE(line["compute_s"].get<double>(), 0.029) << line.dump();
  }
}

TEST(TrainMainTest, TrainsWithFaultsAndWritesOneLinePerIterationPerRank) {
  const std::string dir = common::testing::FreshDir("train");
  const Outcome o = Train(
      "--dp 2 --pp 2 --micro-batches 4 --steps 6 --json-log log.jsonl "
      "--faults 'compute:rank=1,factor=1.5,from=2; link:src=2,dst=0,delay_ms=1'",
      dir);
  ASSERT_EQ(o.exit_code, 0) << o.output;
  const auto log = testing::ReadJsonLines(dir + "/log.jsonl");
  ASSERT_EQ(log.size(), 24u);
  std::ifstream raw(dir + "/log.jsonl");
  std::string first;
  std::getline(raw, first);
  EXPECT_THAT(first, ::testing::StartsWith("{\"iteration\":"));  // Field order as documented.
  for (const auto& line : log) {
    for (const char* key : {"iteration", "rank", "loss", "iteration_time_s", "plan_version"}) {
      EXPECT_TRUE(line.contains(key)) << line.dump();
    }
  }
}

TEST(TrainMainTest, CheckpointRestartRelaunchesWithoutTheExcludedRank) {
  const std::string dir = common::testing::FreshDir("s4");
  std::ofstream(dir + "/directives.jsonl")
      << R"({"directive": {"directive_id": 1, "effective_iteration": 3, "plan_version": 1,)"
         R"( "checkpoint_restart": {"checkpoint_dir": "ckpt", "excluded_ranks": [1]}}})"
      << "\n";
  const Outcome o = Train(
      "--dp 2 --pp 2 --micro-batches 4 --steps 6 --json-log log.jsonl --checkpoint-dir out "
      "--directives directives.jsonl --faults 'compute:rank=3,factor=1.5'",
      dir);
  ASSERT_EQ(o.exit_code, 0) << o.output;
  EXPECT_THAT(o.output, HasSubstr("S4 restart from"));
  EXPECT_THAT(o.output, HasSubstr("DP=1 x PP=2 on 2 ranks (old ranks 0,2)"));
  const auto log = testing::ReadJsonLines(dir + "/log.jsonl");
  int before = 0, after = 0;
  for (const auto& line : log) {
    (line["iteration"] < 3 ? before : after)++;
    if (line["iteration"] >= 3) {
      EXPECT_LT(line["rank"], 2);
    }
  }
  EXPECT_EQ(before, 4 * 3);
  EXPECT_EQ(after, 2 * 3);
  const std::vector<double> loss = testing::LossCurve(log);
  EXPECT_EQ(loss.size(), 6u);
}

TEST(TrainMainTest, ValidationTasksDeliveredTogetherRunOnceEachInsideThePause) {
  // A validation's tasks arrive together (common.proto ValidationTask): the ranks run them one at
  // a time in task_id order, each participant answers each task once, and the job resumes.
  const std::string dir = common::testing::FreshDir("tasks");
  std::ofstream(dir + "/directives.jsonl")
      << R"({"directive": {"directive_id": 1, "effective_iteration": 2, "pause": {"max_duration_ns": 60000000000}}})"
         "\n"
      << R"({"directive": {"directive_id": 2, "effective_iteration": 2, "resume": {}}})"
         "\n"
      << R"({"iteration": 2, "validation_task": {"task_id": 12, "ranks": [2, 3], "link_pass": {"pass_index": 1, "links": [{"src_rank": 3, "dst_rank": 2}], "bytes": 4096, "repeats": 2}}})"
         "\n"
      << R"({"iteration": 2, "validation_task": {"task_id": 10, "ranks": [0, 1, 2, 3], "gemm": {"m": 16, "n": 16, "k": 16, "repeats": 2}}})"
         "\n"
      << R"({"iteration": 2, "validation_task": {"task_id": 11, "ranks": [0, 1], "link_pass": {"pass_index": 0, "links": [{"src_rank": 0, "dst_rank": 1}], "bytes": 4096, "repeats": 2}}})"
         "\n";
  const Outcome o = Train(
      "--dp 2 --pp 2 --micro-batches 4 --steps 5 --json-log log.jsonl --events-log events.jsonl "
      "--directives directives.jsonl",
      dir);
  ASSERT_EQ(o.exit_code, 0) << o.output;
  std::map<uint64_t, std::vector<int>> answered;  // task_id -> ranks, in order of the lines.
  for (const nlohmann::json& e : testing::ReadJsonLines(dir + "/events.jsonl")) {
    if (e["event"] != "validation") continue;
    EXPECT_FALSE(e["result"].contains("error")) << e.dump();
    answered[std::stoull(e["result"]["task_id"].get<std::string>())].push_back(e["rank"]);
  }
  auto sorted = [](std::vector<int> v) {
    std::sort(v.begin(), v.end());
    return v;
  };
  EXPECT_EQ(sorted(answered[10]), (std::vector<int>{0, 1, 2, 3})) << o.output;
  EXPECT_EQ(sorted(answered[11]), (std::vector<int>{0, 1})) << o.output;
  EXPECT_EQ(sorted(answered[12]), (std::vector<int>{2, 3})) << o.output;
  EXPECT_EQ(testing::ReadJsonLines(dir + "/log.jsonl").size(), 4u * 5);  // Resumed to the end.
}

std::string Binary() {
  return absl::StrCat(std::getenv("TEST_SRCDIR"), "/falcon/trainer/falcon_train");
}

// Small model flags, as Train() adds them.
std::vector<std::string> SmallRun(std::vector<std::string> extra) {
  std::vector<std::string> argv = {Binary(),    "--hidden=32", "--ffn=64",       "--batch=8",
                                   "--embed=8", "--context=4", "--print_every=0"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return argv;
}

// The names in `dir` that start with "falcon_train.".
std::vector<std::string> ControlDirs(const std::string& dir) {
  std::vector<std::string> out;
  if (DIR* d = opendir(dir.c_str()); d != nullptr) {
    while (const dirent* e = readdir(d)) {
      if (absl::StartsWith(e->d_name, "falcon_train.")) out.push_back(e->d_name);
    }
    closedir(d);
  }
  return out;
}

// `falcon_train --help` exited 1 (Abseil's own --help).
TEST(TrainMainTest, HelpPrintsEveryFlagOnStdoutAndExitsZero) {
  for (const char* flag : {"--help", "-h"}) {
    absl::StatusOr<common::testing::BinaryRun> r = common::testing::RunBinary({Binary(), flag});
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->status, common::ExitStatus::Exited(0)) << flag << ": " << r->output();
    EXPECT_THAT(r->out, HasSubstr("usage: falcon_train --dp D --pp P")) << flag;
    EXPECT_THAT(r->out, HasSubstr("  --micro-batches (")) << flag;
    EXPECT_THAT(r->out, HasSubstr("  --lr (Adam learning rate, (0, 1]) default: 0.002")) << flag;
  }
}

// Every run left an empty /tmp/falcon_train.XXXXXX behind. The control directory now lives under
// $TMPDIR while the launcher runs (seen here) and is gone after it ends, also when it is stopped
// by SIGTERM mid-run or ends normally.
TEST(TrainMainTest, ControlDirectoryIsRemovedWhenTheLauncherEnds) {
  const std::string tmp = common::testing::FreshDir("control_dir");
  std::vector<std::string> env = {"TMPDIR=" + tmp, "PATH=/usr/bin:/bin"};
  common::SpawnOptions options;
  // 10 s of emulated compute per micro-batch: the run outlasts the test.
  options.argv = SmallRun(
      {"--dp=1", "--pp=1", "--micro-batches=1", "--steps=1000", "--emulated_compute_ms=10000"});
  options.env = env;
  options.stdout_stream = common::Stdio::File(tmp + "/long.out");
  options.stderr_stream = common::Stdio::SameAsStdout();
  absl::StatusOr<common::Subprocess> launcher = common::Subprocess::Spawn(options);
  ASSERT_TRUE(launcher.ok()) << launcher.status();
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (ControlDirs(tmp).empty() && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  ASSERT_EQ(ControlDirs(tmp).size(), 1u) << "no control directory under $TMPDIR";
  ASSERT_TRUE(launcher->Signal(SIGTERM).ok());
  absl::StatusOr<std::optional<common::ExitStatus>> ended = launcher->WaitFor(absl::Seconds(60));
  ASSERT_TRUE(ended.ok() && ended->has_value()) << "launcher did not end after SIGTERM";
  EXPECT_THAT(ControlDirs(tmp), ::testing::IsEmpty());

  common::testing::RunOptions run;
  run.env = env;
  absl::StatusOr<common::testing::BinaryRun> done = common::testing::RunBinary(
      SmallRun({"--dp=1", "--pp=1", "--micro-batches=1", "--steps=1"}), run);
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->status, common::ExitStatus::Exited(0)) << done->output();
  EXPECT_THAT(ControlDirs(tmp), ::testing::IsEmpty());
}

// Each of these was accepted (and ignored, or only refused by a rank after the launch), or
// aborted: --data /dev/zero threw std::bad_alloc.
TEST(TrainMainTest, BadFlagsAreRefusedBeforeTheLaunch) {
  const std::string dir = common::testing::FreshDir("bad_flags");
  std::ofstream(dir + "/a-file") << "x";
  const struct {
    std::vector<std::string> args;
    std::string message;
  } cases[] = {
      {{"--lr=nan"}, "--lr: nan is not a number in (0, 1]"},
      {{"--lr=-1"}, "--lr: -1 is not a number in (0, 1]"},
      {{"--steps=-5"}, "--steps: -5 is not in [0, 1000000000]"},
      {{"--max_restarts=-1"}, "--max_restarts: -1 is not in [0, 100]"},
      {{"--print_every=-1"}, "--print_every: -1 is not in [0, 1000000000]"},
      {{"--ffn=-5"}, "--ffn: -5 is not in [0, 65536]"},
      {{"--data=/dev/zero"}, "training text: /dev/zero: larger than the limit of 67108864 bytes"},
      {{"--data=" + dir}, "training text: " + dir + ": is a directory, not a file"},
      {{"--resume=/nonexistent"}, "--resume: '/nonexistent' is not a directory"},
      {{"--checkpoint_dir=" + dir + "/a-file"},
       "--checkpoint_dir: '" + dir + "/a-file' exists and is not a directory"},
      {{"--faults=@" + dir}, "--faults: fault spec file " + dir + ": is a directory, not a file"},
      {{"--directives=" + dir},
       "--directives: directive script " + dir + ": is a directory, not a file"},
      {{"--json_log=" + dir}, "--json_log: cannot write '" + dir + "'"},
      {{"stray"}, "unexpected argument 'stray'"},
  };
  for (const auto& c : cases) {
    std::vector<std::string> args = {"--dp=1", "--pp=1", "--micro-batches=1", "--steps=1"};
    args.insert(args.end(), c.args.begin(), c.args.end());
    common::testing::RunOptions run;
    run.timeout = absl::Seconds(60);
    absl::StatusOr<common::testing::BinaryRun> r = common::testing::RunBinary(SmallRun(args), run);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->status, common::ExitStatus::Exited(2)) << c.args[0] << ": " << r->output();
    EXPECT_THAT(r->err, HasSubstr("falcon_train: " + c.message)) << c.args[0];
    EXPECT_THAT(r->output(), ::testing::Not(HasSubstr("falcon_launch: started"))) << c.args[0];
  }
}

}  // namespace
}  // namespace falcon::trainer
