#include "deploy/demo/scenario.h"

#include "collective/fault/fault_spec.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace falcon::deploy::demo {
namespace {

TEST(LayoutTest, Parses) {
  absl::StatusOr<Layout> l = ParseLayout("4x2");
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ(l->dp, 4);
  EXPECT_EQ(l->pp, 2);
  EXPECT_EQ(l->ToString(), "4x2");
  for (const char* bad : {"", "4", "4x", "x2", "0x2", "4x0", "axb", "9x9", "4x2x1"}) {
    absl::StatusOr<Layout> b = ParseLayout(bad);
    ASSERT_FALSE(b.ok()) << bad;
    EXPECT_NE(b.status().message().find("--layout"), std::string::npos);
  }
}

TEST(ScenarioTest, EveryScenarioProducesAParsableSpec) {
  for (const std::string& name : ScenarioNames()) {
    absl::StatusOr<Scenario> s = MakeScenario(name, Layout{4, 2}, 4, 600);
    if (name == "nic" || name == "nic-s4") {
      EXPECT_THAT(std::string(s.status().message()), ::testing::HasSubstr("kernel fault driver"));
      continue;
    }
    ASSERT_TRUE(s.ok()) << name << ": " << s.status();
    absl::StatusOr<collective::fault::FaultPlan> plan =
        collective::fault::ParseFaultSpec(s->FaultSpec());
    ASSERT_TRUE(plan.ok()) << name << ": " << plan.status() << " in '" << s->FaultSpec() << "'";
    EXPECT_EQ(plan->compute.size() + plan->links.size() + plan->contention.size(),
              s->faults.size());
    for (const InjectedFault& f : s->faults) {
      EXPECT_LT(f.from_iteration, f.to_iteration) << name;
      EXPECT_LE(f.to_iteration, 600) << name;
      EXPECT_GE(f.from_iteration, 50) << name << ": needs a healthy baseline";
    }
  }
}

TEST(ScenarioTest, KernelScenariosAreDriverSpecsWithoutWindows) {
  for (const std::string& name : ScenarioNames()) {
    absl::StatusOr<Scenario> s = MakeScenario(name, Layout{4, 2}, 4, 600, FaultInjection::kKernel);
    ASSERT_TRUE(s.ok()) << name << ": " << s.status();
    EXPECT_EQ(s->injection, FaultInjection::kKernel);
    for (const InjectedFault& f : s->faults) {
      EXPECT_EQ(f.injection, FaultInjection::kKernel) << name;
      EXPECT_FALSE(f.ToSpec().empty()) << name;
      EXPECT_EQ(f.ToSpec().find("from="), std::string::npos) << name << ": " << f.ToSpec();
      EXPECT_EQ(f.delay_ms, 0) << name << ": no netem, no delays";
      EXPECT_LT(f.from_iteration, f.to_iteration) << name;
      EXPECT_LE(f.to_iteration, 600) << name;
      EXPECT_GE(f.from_iteration, 50) << name << ": needs a healthy baseline";
    }
  }
  absl::StatusOr<Scenario> nic = MakeScenario("nic", Layout{4, 2}, 4, 600, FaultInjection::kKernel);
  EXPECT_EQ(nic->faults[0].ToSpec(), "nic:node=node2,rate=1000kbit,burst=4kb");
  absl::StatusOr<Scenario> dp =
      MakeScenario("dp-link", Layout{4, 2}, 4, 600, FaultInjection::kKernel);
  EXPECT_EQ(dp->faults[0].ToSpec(), "link:src_rank=1,dst_rank=2,rate=2000kbit,burst=4kb");
  absl::StatusOr<Scenario> c =
      MakeScenario("compute", Layout{4, 2}, 4, 600, FaultInjection::kKernel);
  EXPECT_EQ(c->faults[0].ToSpec(), "compute:rank=2,slowdown=1.5,period=30ms,thread=falcon-device");
}

TEST(ScenarioTest, DefaultInjectsComputeThenLinkAcrossNodes) {
  absl::StatusOr<Scenario> s = MakeScenario("compute-link", Layout{4, 2}, 4, 1000);
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->faults.size(), 2u);
  const InjectedFault& c = s->faults[0];
  const InjectedFault& l = s->faults[1];
  EXPECT_EQ(c.kind, FaultKind::kCompute);
  EXPECT_EQ(c.factor, 1.5);
  EXPECT_EQ(c.expected_cause, "COMPUTE");
  EXPECT_EQ(c.expected_strategy, "S2");
  EXPECT_EQ(l.kind, FaultKind::kLink);
  EXPECT_LT(c.to_iteration, l.from_iteration);
  // A pipeline link (stage 0 -> stage 1 of one DP group) between two nodes.
  EXPECT_EQ(l.dst_rank, l.src_rank + 4);
  EXPECT_NE(NodeOf(l.src_rank, 8, 4), NodeOf(l.dst_rank, 8, 4));
  EXPECT_EQ(l.expected_cause, "COMMUNICATION");
  EXPECT_EQ(l.expected_strategy, "S3");
  EXPECT_EQ(c.ToSpec(), "compute:rank=2,factor=1.5,from=250,to=570");
}

TEST(ScenarioTest, BlipExpectsNoEventAndHealthyHasNoFault) {
  absl::StatusOr<Scenario> blip = MakeScenario("blip", Layout{4, 2}, 4, 400);
  ASSERT_TRUE(blip.ok());
  ASSERT_EQ(blip->faults.size(), 1u);
  EXPECT_FALSE(blip->faults[0].expect_event);
  EXPECT_LE(blip->faults[0].factor, 1.05);
  // From outside the job: x1.05 of the emulated device's nominal demand, not of its use when
  // applied (which load can lower).
  absl::StatusOr<Scenario> kernel_blip =
      MakeScenario("blip", Layout{4, 2}, 4, 400, FaultInjection::kKernel);
  ASSERT_TRUE(kernel_blip.ok());
  EXPECT_EQ(kernel_blip->faults[0].ToSpec(),
            "compute:rank=2,quota=0.0952381,period=30ms,thread=falcon-device");
  absl::StatusOr<Scenario> healthy = MakeScenario("healthy", Layout{4, 2}, 4, 400);
  ASSERT_TRUE(healthy.ok());
  EXPECT_TRUE(healthy->faults.empty());
  EXPECT_EQ(healthy->FaultSpec(), "");
  absl::StatusOr<Scenario> restart = MakeScenario("restart", Layout{4, 2}, 4, 400);
  ASSERT_TRUE(restart.ok());
  EXPECT_GT(restart->restart_controller_at_iteration, restart->faults[0].from_iteration);
}

TEST(ScenarioTest, RejectsBadInputNamingTheField) {
  auto message = [](absl::StatusOr<Scenario> s) {
    return s.ok() ? std::string("ok") : std::string(s.status().message());
  };
  EXPECT_NE(message(MakeScenario("nope", Layout{4, 2}, 4, 400)).find("--scenario"),
            std::string::npos);
  EXPECT_NE(message(MakeScenario("compute", Layout{1, 2}, 2, 400)).find("--layout"),
            std::string::npos);
  EXPECT_NE(message(MakeScenario("link", Layout{4, 1}, 4, 400)).find("--layout"),
            std::string::npos);
  EXPECT_NE(message(MakeScenario("healthy", Layout{4, 2}, 3, 400)).find("nodes"),
            std::string::npos);
  EXPECT_NE(message(MakeScenario("link", Layout{4, 2}, 1, 400)).find("nodes"), std::string::npos);
  EXPECT_NE(message(MakeScenario("healthy", Layout{4, 2}, 4, 10)).find("iterations"),
            std::string::npos);
  EXPECT_NE(message(MakeScenario("healthy", Layout{4, 2}, 4, 2'000'000)).find("at most"),
            std::string::npos);
}

}  // namespace
}  // namespace falcon::deploy::demo
