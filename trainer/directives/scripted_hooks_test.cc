#include "trainer/directives/scripted_hooks.h"

#include <cstdlib>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace falcon::trainer::directives {
namespace {

using ::testing::HasSubstr;

constexpr char kScript[] = R"(# a pause with two tests, then a plan
{"directive": {"directive_id": 1, "effective_iteration": 2, "pause": {"max_duration_ns": 1000}}}
{"directive": {"directive_id": 2, "effective_iteration": 2, "resume": {}}}
{"iteration": 2, "validation_task": {"task_id": 7, "ranks": [0], "gemm": {"m": 4, "n": 4, "k": 4, "repeats": 1}}}

{"directive": {"directive_id": 3, "effective_iteration": 5, "plan_version": 1, "micro_batch_plan": {"micro_batches": [2, 2]}}}
)";

TEST(ScriptedHooksTest, ParsesAndDeliversAtTheRightIterations) {
  absl::StatusOr<DirectiveScript> script = ParseDirectiveScript(kScript);
  ASSERT_TRUE(script.ok()) << script.status();
  ASSERT_EQ(script->directives.size(), 3u);
  ASSERT_EQ(script->tasks.size(), 1u);
  EXPECT_EQ(script->tasks[0].iteration, 2);
  ScriptedHooks hooks(*std::move(script), 0);
  EXPECT_TRUE(hooks.PollDirectives(1).empty());
  // The pause comes at 2; its resume waits until the task of iteration 2 was handed out.
  auto at2 = hooks.PollDirectives(2);
  ASSERT_EQ(at2.size(), 1u);
  EXPECT_TRUE(at2[0].has_pause());
  EXPECT_TRUE(hooks.PollValidationTasks(1).empty());
  EXPECT_EQ(hooks.PollValidationTasks(2).size(), 1u);
  EXPECT_TRUE(hooks.PollValidationTasks(2).empty());
  auto resume = hooks.PollDirectives(2);
  ASSERT_EQ(resume.size(), 1u);
  EXPECT_TRUE(resume[0].has_resume());
  EXPECT_TRUE(hooks.PollDirectives(4).empty());
  EXPECT_EQ(hooks.PollDirectives(9).size(), 1u);  // Late polls still deliver, once.
  EXPECT_TRUE(hooks.PollDirectives(9).empty());
}

TEST(ScriptedHooksTest, ScriptsALayerSplit) {
  absl::StatusOr<DirectiveScript> script = ParseDirectiveScript(
      R"({"directive": {"directive_id": 4, "effective_iteration": 3, "plan_version": 2,)"
      R"( "layer_split": {"replicas": [{"stage_blocks": [3, 5]}, {"stage_blocks": [4, 4]}],)"
      R"( "micro_batches": [3, 5]}}})");
  ASSERT_TRUE(script.ok()) << script.status();
  ASSERT_EQ(script->directives.size(), 1u);
  const falcon::v1::Directive& d = script->directives[0].directive;
  ASSERT_TRUE(d.has_layer_split());
  ASSERT_EQ(d.layer_split().replicas_size(), 2);
  EXPECT_EQ(d.layer_split().replicas(0).stage_blocks(0), 3u);
  EXPECT_EQ(d.layer_split().replicas(1).stage_blocks(1), 4u);
  EXPECT_EQ(d.layer_split().micro_batches(1), 5u);
  EXPECT_THAT(std::string(ParseDirectiveScript(R"({"directive": {"directive_id": 4,)"
                                               R"( "layer_split": {"replicas": 3}}})")
                              .status()
                              .message()),
              HasSubstr("line 1: directive"));
}

TEST(ScriptedHooksTest, DeliverAtAndRanksChooseWhenAndToWhom) {
  absl::StatusOr<DirectiveScript> script = ParseDirectiveScript(
      R"({"ranks": [1], "deliver_at": 4, "directive": {"directive_id": 5, )"
      R"("effective_iteration": 2, "resume": {}}})"
      "\n"
      R"({"deliver_at": 1, "directive": {"directive_id": 6, "effective_iteration": 3, )"
      R"("resume": {}}})");
  ASSERT_TRUE(script.ok()) << script.status();
  ScriptedHooks rank0(*script, 0), rank1(*script, 1);
  ASSERT_EQ(rank0.PollDirectives(1).size(), 1u);  // Id 6, delivered early.
  EXPECT_TRUE(rank0.PollDirectives(9).empty());   // Id 5 is rank 1's only.
  ASSERT_EQ(rank1.PollDirectives(1).size(), 1u);
  EXPECT_TRUE(rank1.PollDirectives(3).empty());
  auto at4 = rank1.PollDirectives(4);
  ASSERT_EQ(at4.size(), 1u);
  EXPECT_EQ(at4[0].directive_id(), 5u);
  EXPECT_THAT(
      std::string(ParseDirectiveScript(R"({"ranks": 1, "directive": {}})").status().message()),
      HasSubstr("\"ranks\""));
  EXPECT_THAT(
      std::string(
          ParseDirectiveScript(R"({"deliver_at": -2, "directive": {}})").status().message()),
      HasSubstr("\"deliver_at\""));
}

TEST(ScriptedHooksTest, BadLinesNameTheLine) {
  EXPECT_THAT(std::string(ParseDirectiveScript("\n{\"nope\": 1}\n").status().message()),
              HasSubstr("line 2"));
  EXPECT_THAT(
      std::string(ParseDirectiveScript("{\"directive\": {\"pause\": 3}}").status().message()),
      HasSubstr("line 1: directive"));
  EXPECT_THAT(std::string(ParseDirectiveScript("not json").status().message()),
              HasSubstr("directive script line 1: not valid JSON at line 1, column 2"));
  EXPECT_THAT(std::string(ParseDirectiveScript("[1]").status().message()),
              HasSubstr("line 1: not a JSON object"));
  EXPECT_EQ(LoadDirectiveScript("/nonexistent/script").status().code(),
            absl::StatusCode::kNotFound);
  // A number beyond a double says where; an iteration above 2^63 does not wrap to negative.
  EXPECT_EQ(std::string(ParseDirectiveScript("\n{\"validation_task\": {}, \"iteration\": 1e400}")
                            .status()
                            .message()),
            "directive script line 2: not valid JSON at line 1, column 42 (byte 42), at "
            "iteration: number overflow parsing '1e400'");
  EXPECT_THAT(std::string(ParseDirectiveScript(
                              "{\"validation_task\": {}, \"iteration\": 18446744073709551615}")
                              .status()
                              .message()),
              HasSubstr("\"iteration\" must be an integer"));
  // A directory read as an empty script (no directives, no error).
  const std::string dir = std::getenv("TEST_TMPDIR");
  EXPECT_EQ(std::string(LoadDirectiveScript(dir).status().message()),
            "directive script " + dir + ": is a directory, not a file");
}

TEST(ScriptedHooksTest, RecordsAcksAndResultsAndWritesEvents) {
  const char* base = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(base != nullptr ? base : "/tmp") + "/events.jsonl";
  std::remove(path.c_str());
  ScriptedHooks hooks(DirectiveScript{}, 3, path);
  falcon::v1::Directive d;
  d.set_directive_id(12);
  hooks.Ack(d, falcon::v1::ACK_STATUS_REJECTED, "bad plan", -1);
  falcon::v1::ValidationResult r;
  r.set_task_id(5);
  r.set_gemm_duration_ns(100);
  hooks.ReportValidation(r);
  ASSERT_EQ(hooks.acks().size(), 1u);
  EXPECT_EQ(hooks.acks()[0].reason, "bad plan");
  ASSERT_EQ(hooks.results().size(), 1u);
  std::ifstream in(path);
  std::string line1, line2;
  std::getline(in, line1);
  std::getline(in, line2);
  EXPECT_THAT(line1, HasSubstr("\"status\":\"ACK_STATUS_REJECTED\""));
  EXPECT_THAT(line1, HasSubstr("\"rank\":3"));
  EXPECT_THAT(line2, HasSubstr("\"event\":\"validation\""));
  EXPECT_THAT(line2, HasSubstr("\"gemm_duration_ns\":\"100\""));
}

}  // namespace
}  // namespace falcon::trainer::directives
