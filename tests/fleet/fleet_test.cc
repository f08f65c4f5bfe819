// The reduced fleet run: 2,048 simulated ranks in four concurrent jobs (TP x PP x DP layouts) on
// real gRPC streams of the real controller. Checks correctness only: the compute fault and the
// link fault get the right verdict (cause and culprit), the healthy jobs raise no event, and no
// agent receives another job's directives, tasks or profiling.
#include "fleet/fleet_run.h"
#include "gtest/gtest.h"

namespace falcon::tests::fleet {
namespace {

using ::falcon::fleet::Fault;
using ::falcon::fleet::JobResult;
using ::falcon::fleet::JobSpec;
using ::falcon::fleet::RunFleet;
using ::falcon::fleet::RunOptions;
using ::falcon::fleet::RunResult;

JobSpec Job(const std::string& name, uint32_t tp, uint32_t pp, uint32_t dp, Fault fault) {
  JobSpec j;
  j.layout.job = name;
  j.layout.tp = tp;
  j.layout.pp = pp;
  j.layout.dp = dp;
  j.layout.ranks_per_node = 8;
  j.fault = fault;
  return j;
}

TEST(FleetTest, VerdictsRightWithoutCrossTalkAt2048Ranks) {
  RunOptions o;
  o.scenario.jobs = {
      Job("compute", 8, 4, 16, {Fault::Kind::kCompute, 301, 1.3, 25}),
      Job("link", 8, 2, 32, {Fault::Kind::kLink, 77, 1.8, 27}),
      Job("healthy-a", 8, 4, 16, {}),
      Job("healthy-b", 4, 8, 16, {}),
  };
  ASSERT_EQ(o.scenario.Ranks(), 2048u);
  o.processes = 4;
  o.period = absl::Milliseconds(500);
  o.settle_iterations = 6;
  o.time_limit = absl::Minutes(6);
  absl::StatusOr<RunResult> r = RunFleet(o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->report.foreign, 0u);
  EXPECT_GT(r->report.summaries, 2048u * 30);
  ASSERT_EQ(r->jobs.size(), 4u);
  for (const JobResult& j : r->jobs) {
    EXPECT_TRUE(j.right) << j.job << ": " << j.events << " events, verdict " << j.verdict;
    if (j.fault.kind != Fault::Kind::kNone) {
      EXPECT_GE(j.detection_delay, 0) << j.job;
      // Localized by real validation tasks through the agents, or from profiling alone.
      EXPECT_TRUE(j.validation_tasks > 0 || j.localized_from_profiling) << j.job;
    } else {
      EXPECT_EQ(j.validation_tasks, 0) << j.job;
    }
  }
}

}  // namespace
}  // namespace falcon::tests::fleet
