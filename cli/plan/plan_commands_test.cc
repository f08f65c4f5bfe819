#include "cli/plan/plan_commands.h"

#include <cstdlib>
#include <fstream>

#include "cli/plan/layout_io.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace falcon::cli::plan {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using Json = nlohmann::json;

std::string TempFile(const std::string& name, const std::string& content) {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
  std::ofstream(path) << content;
  return path;
}

std::string Error(const absl::StatusOr<std::string>& out) {
  EXPECT_FALSE(out.ok());
  return std::string(out.status().message());
}

TEST(PlanS2Test, JsonMatchesTheIssueShape) {
  S2Request r;
  r.times = "1,1,1.5,1";
  r.micro_batches = 32;
  r.multiple = 2;
  r.json = true;
  absl::StatusOr<std::string> out = RunS2(r);
  ASSERT_TRUE(out.ok()) << out.status();
  const Json j = Json::parse(*out);
  EXPECT_EQ(j["m"], Json::parse("[10,8,6,8]"));
  EXPECT_DOUBLE_EQ(j["makespan"].get<double>(), 10.0);
  EXPECT_DOUBLE_EQ(j["baseline_makespan"].get<double>(), 12.0);  // even split: 8 x 1.5 s
  EXPECT_DOUBLE_EQ(j["predicted_speedup"].get<double>(), 1.2);
  EXPECT_DOUBLE_EQ(j["spread"].get<double>(), 2.0);
  // Against the plan in force instead of the even split; and excluded groups.
  r.current = "12,8,4,8";
  EXPECT_DOUBLE_EQ(Json::parse(*RunS2(r))["predicted_speedup"].get<double>(), 1.2);
  r.current = "";
  r.exclude = "2";
  EXPECT_EQ(Json::parse(*RunS2(r))["m"], Json::parse("[12,10,0,10]"));
  r.json = false;
  r.exclude = "";
  EXPECT_THAT(*RunS2(r), HasSubstr("makespan 10.0000 s, spread 2.0000 s; even split 12.0000 s: "
                                   "predicted speedup 1.200x"));
}

TEST(PlanS2Test, ExcludeComparesWithTheCurrentPlanThatStillUsesTheGroups) {
  // Group 2 is 3x slow. Today it runs the even split 8,8,8,8 (makespan 24 s); excluding it gives
  // 12,10,0,10 (12 s): a 2x speedup. The baseline is not the even split over the other groups.
  S2Request r;
  r.times = "1,1,3,1";
  r.micro_batches = 32;
  r.multiple = 2;
  r.exclude = "2";
  r.json = true;
  absl::StatusOr<std::string> out = RunS2(r);
  ASSERT_TRUE(out.ok()) << out.status();
  Json j = Json::parse(*out);
  EXPECT_EQ(j["m"], Json::parse("[12,10,0,10]"));
  EXPECT_DOUBLE_EQ(j["makespan"].get<double>(), 12.0);
  EXPECT_DOUBLE_EQ(j["baseline_makespan"].get<double>(), 24.0);
  EXPECT_DOUBLE_EQ(j["predicted_speedup"].get<double>(), 2.0);
  // The plan in force gives the group to be excluded micro-batches: accepted.
  r.current = "8,8,8,8";
  out = RunS2(r);
  ASSERT_TRUE(out.ok()) << out.status();
  j = Json::parse(*out);
  EXPECT_DOUBLE_EQ(j["baseline_makespan"].get<double>(), 24.0);
  EXPECT_DOUBLE_EQ(j["predicted_speedup"].get<double>(), 2.0);
  // A plan in force that already left the group out is evaluated without it.
  r.current = "10,10,0,12";
  out = RunS2(r);
  ASSERT_TRUE(out.ok()) << out.status();
  j = Json::parse(*out);
  EXPECT_DOUBLE_EQ(j["baseline_makespan"].get<double>(), 12.0);
  EXPECT_DOUBLE_EQ(j["predicted_speedup"].get<double>(), 1.0);
  // M too small for the even split over all groups: the baseline is the one over the kept ones.
  r.current = "";
  r.micro_batches = 6;
  r.times = "1,1,3,1";
  r.json = false;
  out = RunS2(r);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(*out, HasSubstr("even split over the groups kept (pass --current for the plan in "
                              "force) 2.0000 s: predicted speedup 1.000x"));
  r.micro_batches = 32;
  // Entries of the plan in force are still checked.
  r.current = "15,1,8,8";
  EXPECT_THAT(Error(RunS2(r)), HasSubstr("--current[0]: must be a positive multiple of 2, got 15"));
  r.current = "8,8,16";
  EXPECT_THAT(Error(RunS2(r)), HasSubstr("--current"));
}

TEST(PlanS2Test, BadInputNamesTheFlag) {
  S2Request r;
  r.times = "1,nan,1";
  r.micro_batches = 6;
  EXPECT_THAT(Error(RunS2(r)), HasSubstr("--times[1]: is NaN"));
  r.times = "1,x";
  EXPECT_THAT(Error(RunS2(r)), HasSubstr("--times[1]: 'x' is not a number"));
  r.times = "1,0";
  EXPECT_THAT(Error(RunS2(r)), HasSubstr("--times[1]: must be a finite number of seconds > 0"));
  r.times = "";
  EXPECT_THAT(Error(RunS2(r)), HasSubstr("--times: required"));
  r.times = "1,1";
  r.multiple = 4;
  EXPECT_THAT(Error(RunS2(r)), HasSubstr("--micro-batches: 6 is not a multiple of multiple = 4"));
  r.multiple = 6;
  EXPECT_THAT(Error(RunS2(r)), HasSubstr("--micro-batches: 6 < active groups (2) x multiple (6)"));
  r.multiple = 1;
  r.exclude = "5";
  EXPECT_THAT(Error(RunS2(r)), HasSubstr("--exclude[0]: 5 is not a DP index"));
  r.exclude = "";
  r.current = "1,1";
  EXPECT_THAT(Error(RunS2(r)), HasSubstr("--current: sum is 2, want M = 6"));
}

TEST(PlanS3Test, PaperFourNodesJson) {
  S3Request r;
  r.layout_path = "cli/plan/testdata/four_nodes.csv";
  r.slow_links = "2-6:4";  // node3 - node4
  r.state_bytes = 1 << 20;
  r.json = true;
  absl::StatusOr<std::string> out = RunS3(r);
  ASSERT_TRUE(out.ok()) << out.status();
  const Json j = Json::parse(*out);
  EXPECT_EQ(j["slow_links_in_dp"]["before"], 1);
  EXPECT_EQ(j["slow_links_in_dp"]["after"], 0);
  EXPECT_GT(j["predicted_iteration_time_s"]["before"].get<double>(),
            j["predicted_iteration_time_s"]["after"].get<double>());
  EXPECT_GT(j["predicted_speedup"].get<double>(), 1.0);
  EXPECT_EQ(j["bytes_to_move"], 4 << 20);
  EXPECT_EQ(j["moved_ranks"].size(), 4u);
  // The output reads back as a layout.
  absl::StatusOr<analysis::plan::Layout> layout = ParseLayout(*out, "output");
  ASSERT_TRUE(layout.ok()) << layout.status();
  EXPECT_EQ(layout->world_size(), 8);
  r.json = false;
  EXPECT_THAT(*RunS3(r), HasSubstr("slow links carrying DP traffic 1 -> 0"));
}

TEST(PlanS3Test, BadInputNamesTheFlag) {
  S3Request r;
  EXPECT_THAT(Error(RunS3(r)), HasSubstr("--layout: required"));
  r.layout_path = "/nonexistent/layout.csv";
  EXPECT_EQ(RunS3(r).status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(Error(RunS3(r)), HasSubstr("--layout: /nonexistent/layout.csv: cannot open"));
  r.layout_path = "cli/plan/testdata/four_nodes.csv";
  r.slow_links = "2-6,3+4";
  EXPECT_THAT(Error(RunS3(r)), HasSubstr("--slow-links[1]: '3+4' is not SRC-DST"));
  r.slow_links = "2-99";
  EXPECT_THAT(Error(RunS3(r)), HasSubstr("--slow-links[0].dst_rank: 99 is not a rank"));
  r.slow_links = "2-6:0.5";
  EXPECT_THAT(Error(RunS3(r)), HasSubstr("--slow-links[0].slowdown: must be in [1, 1000]"));
  r.slow_links = "";
  r.slow_ranks = "1:x";
  EXPECT_THAT(Error(RunS3(r)), HasSubstr("--slow-ranks[0]: '1:x': slowdown is not a number"));
  r.slow_ranks = "";
  r.stage_compute_s = "1,1,1";
  EXPECT_THAT(Error(RunS3(r)), HasSubstr("--stage-compute-s: has 3 entries, want 1 or P = 2"));
  r.stage_compute_s = "";
  r.p2p_s = -1;
  EXPECT_THAT(Error(RunS3(r)), HasSubstr("--p2p-s: must be a finite number"));
  r.p2p_s = 0.01;
  r.replica_micro_batches = int64_t{9'000'000'000'000'000'000};
  EXPECT_THAT(
      Error(RunS3(r)),
      HasSubstr("--replica-micro-batches: must be in [1, 1000000], got 9000000000000000000"));
  r.replica_micro_batches = 8;
  r.layout_path = TempFile("bad_layout.csv", "rank,node,dp,pp,tp\n0,a,0,0,0\n1,b,0,0,1\n");
  EXPECT_THAT(Error(RunS3(r)), HasSubstr("TP groups must stay inside a node"));
}

TEST(PlanEscalateTest, ReplaysTheTrace) {
  EscalateRequest r;
  r.trace_path = "cli/plan/testdata/trace.csv";
  r.json = true;
  absl::StatusOr<std::string> out = RunEscalate(r);
  ASSERT_TRUE(out.ok()) << out.status();
  const Json j = Json::parse(*out);
  EXPECT_EQ(j["events"], 2);
  std::vector<std::string> actions;
  for (const Json& s : j["steps"]) {
    actions.push_back(s["action"].get<std::string>() + " " + s["strategy"].get<std::string>());
    EXPECT_FALSE(s["reason"].get<std::string>().empty());
  }
  // Compute event: S1, S2, S3, then it clears: revert S3, S2. Communication event: S1, S3, clear.
  EXPECT_THAT(actions, ElementsAre("apply S1", "apply S2", "apply S3", "revert S3", "revert S2",
                                   "end S3", "apply S1", "apply S3", "revert S3", "end S3"));
  const Json& steps = j["steps"];
  EXPECT_EQ(steps[0]["iteration"], 20);
  EXPECT_EQ(steps[1]["iteration"], 24);  // 5 slow iterations lose 5 x 1 s = the S2 cost
  EXPECT_DOUBLE_EQ(steps[1]["lost_s"].get<double>(), 5.0);
  EXPECT_DOUBLE_EQ(steps[1]["time_s"].get<double>(), 20 + 5 * 2.0);
  // Then 0.2 s per 1.2 s iteration: S3 at 60 s lost, 270 iterations later.
  EXPECT_NEAR(steps[2]["iteration"].get<int>(), 295, 1);
  EXPECT_EQ(steps[3]["iteration"], 326);  // first healthy row
  EXPECT_EQ(steps[7]["iteration"], 375);  // 40 x 1.5 s = 60 s
  r.json = false;
  r.disable = "s3";
  absl::StatusOr<std::string> text = RunEscalate(r);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_THAT(*text, HasSubstr("apply  S2 micro-batch"));
  EXPECT_THAT(*text, Not(HasSubstr("apply  S3 topology")));
}

TEST(PlanEscalateTest, BadInputNamesTheFlagOrLine) {
  EscalateRequest r;
  EXPECT_THAT(Error(RunEscalate(r)), HasSubstr("--trace: required"));
  r.trace_path = TempFile("slow_first.csv", "iteration,iteration_time_s,cause\n0,2,compute\n");
  EXPECT_THAT(Error(RunEscalate(r)), HasSubstr("slow_first.csv:2: an event starts before any "
                                               "healthy iteration; pass --healthy-s"));
  r.healthy_s = 3;
  EXPECT_THAT(Error(RunEscalate(r)),
              HasSubstr("slow_first.csv:2: column iteration_time_s: the event's first iteration"));
  r.healthy_s = 1;
  EXPECT_TRUE(RunEscalate(r).ok());
  r.disable = "s5";
  EXPECT_THAT(Error(RunEscalate(r)), HasSubstr("--disable[0]: 's5' is not one of s2, s3, s4"));
  r.disable = "";
  r.s3_cost_s = -1;
  EXPECT_THAT(Error(RunEscalate(r)), HasSubstr("--s3-cost-s: must be a finite number"));
  r.s3_cost_s = 60;
  r.s2_cost_iterations = -2;
  EXPECT_THAT(Error(RunEscalate(r)), HasSubstr("s2_cost_iterations: must be in [0, 1e6]"));
}

}  // namespace
}  // namespace falcon::cli::plan
