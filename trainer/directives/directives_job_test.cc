// Multi-process tests of the directives that stop training: S4 checkpoint-restart on fewer ranks,
// and pause + validation.
#include <map>
#include <string>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/testing/job.h"

namespace falcon::trainer::directives {
namespace {

using ::testing::HasSubstr;
using testing::JobRun;
using testing::JobSpec;
using testing::ReadJsonLines;

TEST(CheckpointRestartTest, ResumeWithoutTheExcludedRankContinuesTheLossCurve) {
  JobSpec base;
  base.dp = 2;
  base.pp = 2;
  base.micro_batches = 4;
  base.steps = 8;
  const JobRun whole = RunJob(base, "whole");
  ASSERT_TRUE(whole.ok()) << common::testing::Describe(whole.exits);

  JobSpec first = base;
  first.directives =
      R"({"directive": {"directive_id": 4, "effective_iteration": 4, "plan_version": 1,)"
      R"( "checkpoint_restart": {"checkpoint_dir": "s4", "excluded_ranks": [3]}}})"
      "\n";
  const JobRun before = RunJob(first, "before");
  for (const common::testing::RankExit& e : before.exits) {
    EXPECT_TRUE(e.exited && e.code == 75) << common::testing::Describe(before.exits);
  }
  const std::string ckpt = before.checkpoint_dir + "/s4";
  absl::StatusOr<checkpoint::CheckpointManifest> manifest = checkpoint::ReadManifest(ckpt);
  ASSERT_TRUE(manifest.ok()) << manifest.status();
  EXPECT_EQ(manifest->iteration, 4);
  EXPECT_EQ(manifest->excluded_ranks, std::vector<int>{3});
  const auto request = ReadJsonLines(before.restart_file);
  ASSERT_EQ(request.size(), 1u);
  EXPECT_EQ(request[0]["checkpoint_dir"], ckpt);
  EXPECT_EQ(request[0]["excluded_ranks"], std::vector<int>{3});
  for (const auto& e : ReadJsonLines(before.events)) {
    EXPECT_EQ(e["status"], "ACK_STATUS_APPLIED");
    EXPECT_THAT(e["reason"].get<std::string>(), HasSubstr("without ranks [3]"));
  }

  // The launcher restarts 3 healthy ranks as DP=1 x PP=2 (one rank stays spare).
  JobSpec after = base;
  after.dp = 1;
  after.pp = 2;
  after.resume_dir = ckpt;
  const JobRun resumed = RunJob(after, "after");
  ASSERT_TRUE(resumed.ok()) << common::testing::Describe(resumed.exits);
  EXPECT_LT(testing::MaxRelativeDiff(testing::ReadParams(resumed.checkpoint_dir, base.model),
                                     testing::ReadParams(whole.checkpoint_dir, base.model)),
            1e-5);
  const std::vector<double> full = testing::LossCurve(ReadJsonLines(whole.json_log));
  std::vector<double> joined = testing::LossCurve(ReadJsonLines(before.json_log));
  ASSERT_EQ(joined.size(), 4u);
  for (double l : testing::LossCurve(ReadJsonLines(resumed.json_log))) joined.push_back(l);
  ASSERT_EQ(joined.size(), full.size());
  for (size_t i = 0; i < full.size(); ++i) EXPECT_NEAR(joined[i], full[i], 1e-5) << i;
  // The resumed run numbers iterations on from the checkpoint.
  EXPECT_EQ(ReadJsonLines(resumed.json_log).front()["iteration"], 4);
}

// Scripted directive lines: Pause (directive 1) and Resume (directive 2) of every rank at
// `iteration`.
std::string PauseLine(int64_t max_duration_ns, int64_t iteration = 1) {
  return absl::StrCat(R"({"directive": {"directive_id": 1, "effective_iteration": )", iteration,
                      R"(, "pause": {"max_duration_ns": )", max_duration_ns, "}}}\n");
}
std::string ResumeLine(int64_t iteration = 1) {
  return absl::StrCat(R"({"directive": {"directive_id": 2, "effective_iteration": )", iteration,
                      R"(, "resume": {}}})", "\n");
}

TEST(PauseValidationTest, PausedJobRunsGemmAndLinkPassesThenResumes) {
  JobSpec plain;
  plain.dp = 2;
  plain.pp = 2;
  plain.micro_batches = 4;
  plain.steps = 4;
  const JobRun a = RunJob(plain, "nopause");
  ASSERT_TRUE(a.ok()) << common::testing::Describe(a.exits);

  JobSpec paused = plain;
  paused.directives =
      PauseLine(30000000000, 2) + ResumeLine(2) +
      R"({"iteration": 2, "validation_task": {"task_id": 11, "job": "t", "ranks": [0, 1, 2, 3],)"
      R"( "gemm": {"m": 64, "n": 64, "k": 64, "repeats": 2}}})"
      "\n"
      R"({"iteration": 2, "validation_task": {"task_id": 12, "job": "t", "ranks": [0, 1, 2, 3],)"
      R"( "link_pass": {"pass_index": 0, "bytes": 65536, "repeats": 2,)"
      R"( "links": [{"src_rank": 0, "dst_rank": 1}, {"src_rank": 2, "dst_rank": 3}]}}})"
      "\n"
      R"({"iteration": 2, "validation_task": {"task_id": 13, "job": "t", "ranks": [0, 1, 2, 3],)"
      R"( "link_pass": {"pass_index": 1, "bytes": 65536, "repeats": 2,)"
      R"( "links": [{"src_rank": 1, "dst_rank": 2}, {"src_rank": 3, "dst_rank": 0}]}}})"
      "\n"
      // One round of two tasks on disjoint ranks: they run at the same time.
      R"({"iteration": 2, "validation_task": {"task_id": 14, "job": "t", "ranks": [0, 1],)"
      R"( "round": 4, "link_pass": {"pass_index": 0, "bytes": 65536, "repeats": 2,)"
      R"( "links": [{"src_rank": 1, "dst_rank": 0}]}}})"
      "\n"
      R"({"iteration": 2, "validation_task": {"task_id": 15, "job": "t", "ranks": [2, 3],)"
      R"( "round": 4, "link_pass": {"pass_index": 0, "bytes": 65536, "repeats": 2,)"
      R"( "links": [{"src_rank": 3, "dst_rank": 2}]}}})"
      "\n";
  const JobRun b = RunJob(paused, "paused");
  ASSERT_TRUE(b.ok()) << common::testing::Describe(b.exits);
  EXPECT_LT(testing::MaxRelativeDiff(testing::ReadParams(b.checkpoint_dir, plain.model),
                                     testing::ReadParams(a.checkpoint_dir, plain.model)),
            1e-5);
  int gemms = 0, link_timings = 0, acks = 0;
  for (const auto& e : ReadJsonLines(b.events)) {
    if (e["event"] == "ack") {
      EXPECT_EQ(e["status"], "ACK_STATUS_APPLIED") << e.dump();
      EXPECT_EQ(e["applied_iteration"], 2);
      ++acks;
      continue;
    }
    const auto& r = e["result"];
    EXPECT_FALSE(r.contains("error")) << e.dump();
    if (r["task_id"] == "11") {  // proto3 JSON writes uint64 as a string.
      EXPECT_GT(std::stoll(r["gemm_duration_ns"].get<std::string>()), 0);
      ++gemms;
    } else {
      // The sender of each link reports its timing.
      if (r.contains("links")) {
        for (const auto& l : r["links"]) {
          EXPECT_EQ(l["link"].value("src_rank", 0), e["rank"]) << e.dump();
          ++link_timings;
        }
      }
    }
  }
  EXPECT_EQ(gemms, 4);
  EXPECT_EQ(link_timings, 6);
  EXPECT_EQ(acks, 8);
  for (const auto& line : ReadJsonLines(b.json_log)) {
    if (line["iteration"] == 2) {
      EXPECT_GT(line["pause_s"].get<double>(), 0);
    }
  }
}

// DP=2, one stage, 2 micro-batches, 3 steps: the smallest job a pause can hold.
JobSpec TwoRanksThreeSteps() {
  JobSpec spec;
  spec.dp = 2;
  spec.pp = 1;
  spec.micro_batches = 2;
  spec.steps = 3;
  return spec;
}

TEST(PauseValidationTest, PauseReleasesItselfAfterItsMaxDuration) {
  JobSpec spec = TwoRanksThreeSteps();
  spec.directives = PauseLine(200000000);
  const JobRun run = RunJob(spec, "autorelease");
  ASSERT_TRUE(run.ok()) << common::testing::Describe(run.exits);
  EXPECT_EQ(ReadJsonLines(run.json_log).size(), 6u);
}

// Rank 0's validation results, in the order it ran the tasks.
std::vector<std::string> TasksRunByRank0(const JobRun& run) {
  std::vector<std::string> out;
  for (const auto& e : ReadJsonLines(run.events)) {
    if (e["event"] == "validation" && e["rank"] == 0) out.push_back(e["result"]["task_id"]);
  }
  return out;
}

// One GEMM task on ranks 0 and 1 of validation `of`, delivered after `after_polls` polls.
std::string GemmTaskLine(int id, int of, int after_polls) {
  return absl::StrCat(
      R"({"iteration": 1, "after_polls": )", after_polls, R"(, "validation_task": {"task_id": )",
      id, R"(, "job": "t", "ranks": [0, 1],)", R"( "round": )", id, R"(, "validation_tasks": )", of,
      R"(, "gemm": {"m": 16, "n": 16, "k": 16, "repeats": 1}}})", "\n");
}

// Task 5 of a validation of three reaches the ranks 20 polls after tasks 6 and 7 (another node's
// agent was slower): the ranks hold 6 and 7 until it is in, then run the three in task_id order
// (round by round), not 6 and 7 first.
TEST(PauseValidationTest, TasksWaitForTheRestOfTheirValidation) {
  JobSpec spec = TwoRanksThreeSteps();
  spec.directives = PauseLine(30000000000) + ResumeLine() + GemmTaskLine(5, 3, 20) +
                    GemmTaskLine(6, 3, 0) + GemmTaskLine(7, 3, 0);
  const JobRun run = RunJob(spec, "wholevalidation");
  ASSERT_TRUE(run.ok()) << common::testing::Describe(run.exits);
  EXPECT_EQ(TasksRunByRank0(run), (std::vector<std::string>{"5", "6", "7"}));
}

// A validation said to have 5 tasks of which 2 ever come (a task lost with a dead agent): after
// the wait (1 s) the ranks run what came; the pause then releases itself.
TEST(PauseValidationTest, AnIncompleteValidationRunsAfterTheWait) {
  JobSpec spec = TwoRanksThreeSteps();
  spec.directives = PauseLine(4000000000) + GemmTaskLine(6, 5, 0) + GemmTaskLine(7, 5, 0);
  const JobRun run = RunJob(spec, "incomplete");
  ASSERT_TRUE(run.ok()) << common::testing::Describe(run.exits);
  EXPECT_EQ(TasksRunByRank0(run), (std::vector<std::string>{"6", "7"}));
  EXPECT_EQ(ReadJsonLines(run.json_log).size(), 6u);
}

// The Resume comes while a validation said to have 3 tasks has 2 in (one of them naming no rank):
// nothing is dropped unheard; each participant answers the held task with an error, and rank 0
// answers the rankless one.
TEST(PauseValidationTest, TasksTheValidationEndsBeforeRunningAreAnsweredWithAnError) {
  JobSpec spec = TwoRanksThreeSteps();
  spec.directives = PauseLine(30000000000) + ResumeLine() + GemmTaskLine(6, 3, 0) +
                    R"({"iteration": 1, "validation_task": {"task_id": 9, "job": "t", "ranks": [],)"
                    R"( "gemm": {"m": 16, "n": 16, "k": 16, "repeats": 1}}})"
                    "\n";
  const JobRun run = RunJob(spec, "resumedearly");
  ASSERT_TRUE(run.ok()) << common::testing::Describe(run.exits);
  std::map<std::string, std::vector<std::string>> errors;  // task_id -> errors, by rank order.
  for (const auto& e : ReadJsonLines(run.events)) {
    if (e["event"] != "validation") continue;
    errors[e["result"]["task_id"]].push_back(e["result"].value("error", ""));
  }
  ASSERT_EQ(errors["6"].size(), 2u);  // Ranks 0 and 1.
  for (const std::string& err : errors["6"]) {
    EXPECT_NE(err.find("not run: the pause ended with 2 of the validation's 3 tasks in"),
              std::string::npos)
        << err;
  }
  ASSERT_EQ(errors["9"].size(), 1u);
  EXPECT_NE(errors["9"][0].find("not run"), std::string::npos) << errors["9"][0];
}

// Agents deliver a directive to the ranks of different nodes at different boundaries, and the
// ranks agree on a directive as soon as one of them has it: a rank can get its own copy after it
// applied the directive. Each rank acknowledges each outcome of an id once, with a reason.
TEST(DirectiveAckTest, EachRankAcksEachOutcomeOnceWhenDeliveriesDiffer) {
  JobSpec spec;
  spec.dp = 2;
  spec.pp = 1;
  spec.micro_batches = 4;
  spec.steps = 6;
  spec.directives =
      // Pause at 1; rank 0 gets the resume while paused, rank 1 only at boundary 2.
      R"({"directive": {"directive_id": 1, "effective_iteration": 1,)"
      R"( "pause": {"max_duration_ns": 20000000000}}})"
      "\n"
      R"({"ranks": [0], "directive": {"directive_id": 2, "effective_iteration": 1, "resume": {}}})"
      "\n"
      R"({"ranks": [1], "deliver_at": 2,)"
      R"( "directive": {"directive_id": 2, "effective_iteration": 1, "resume": {}}})"
      "\n"
      // A plan rank 1 gets a boundary after rank 0 (who applies it for both at 3).
      R"({"ranks": [0], "directive": {"directive_id": 3, "effective_iteration": 3,)"
      R"( "plan_version": 1, "micro_batch_plan": {"micro_batches": [3, 1]}}})"
      "\n"
      R"({"ranks": [1], "deliver_at": 4, "directive": {"directive_id": 3,)"
      R"( "effective_iteration": 3, "plan_version": 1, "micro_batch_plan": {"micro_batches": [3, 1]}}})"
      "\n"
      // A plan delivered two boundaries early: RECEIVED, then APPLIED.
      R"({"deliver_at": 2, "directive": {"directive_id": 4, "effective_iteration": 4,)"
      R"( "plan_version": 2, "micro_batch_plan": {"micro_batches": [2, 2]}}})"
      "\n";
  const JobRun run = RunJob(spec, "acks");
  ASSERT_TRUE(run.ok()) << common::testing::Describe(run.exits);
  std::map<std::tuple<int, uint64_t, std::string>, int> acks;
  for (const auto& e : ReadJsonLines(run.events)) {
    if (e["event"] != "ack") continue;
    ++acks[{e["rank"].get<int>(), e["directive_id"].get<uint64_t>(),
            e["status"].get<std::string>()}];
    EXPECT_FALSE(e["reason"].get<std::string>().empty()) << e.dump();
  }
  std::map<std::tuple<int, uint64_t, std::string>, int> want;
  for (int rank : {0, 1}) {
    for (uint64_t id : {1, 2, 3, 4}) want[{rank, id, "ACK_STATUS_APPLIED"}] = 1;
    want[{rank, 4, "ACK_STATUS_RECEIVED"}] = 1;
  }
  EXPECT_EQ(acks, want);
}

}  // namespace
}  // namespace falcon::trainer::directives
