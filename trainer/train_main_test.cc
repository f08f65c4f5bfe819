// End to end: the falcon_train binary as `./falcon train` runs it (launcher + rank processes).
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
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

}  // namespace
}  // namespace falcon::trainer
