// A real one-direction link cap (root): two namespaces joined by a veth pair, TCP throughput in
// both directions before, during and after an 8 mbit cap of node0 -> node1. Assertions are ratios
// between directions and phases of the same run, so that a loaded machine only makes them looser.
#include <unistd.h>

#include <cstdio>
#include <memory>

#include "chaos/clear.h"
#include "chaos/driver.h"
#include "chaos/real_test_util.h"
#include "chaos/runner.h"
#include "chaos/tc.h"
#include "common/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/skip.h"

namespace falcon::chaos {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr absl::Duration kWindow = absl::Seconds(1);
constexpr double kCapBytesPerSecond = 8e6 / 8;

struct Pair {
  double forward;  // node0 -> node1 (the capped direction).
  double reverse;  // node1 -> node0.
};

class LinkRealTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) FALCON_SKIP_OR_FAIL("not root: network namespaces and tc need root");
    FALCON_REQUIRE_EXECUTABLE("/usr/sbin/tc", "Debian package iproute2");
    FALCON_REQUIRE_EXECUTABLE("/usr/sbin/ip", "Debian package iproute2");
    runner_ = NewRealRunner();
    absl::StatusOr<std::unique_ptr<VethNamespaces>> ns = VethNamespaces::Create(runner_.get());
    if (!ns.ok()) {
      FALCON_SKIP_OR_FAIL("cannot make network namespaces here (" +
                          std::string(ns.status().message()) + ")");
    }
    ns_ = *std::move(ns);
  }

  Pair Measure(const char* phase) {
    const cluster::ClusterSpec& c = ns_->cluster();
    absl::StatusOr<double> f =
        TcpThroughput(c.nodes[0].netns, c.nodes[1].netns, c.nodes[1].address, kWindow);
    absl::StatusOr<double> r =
        TcpThroughput(c.nodes[1].netns, c.nodes[0].netns, c.nodes[0].address, kWindow);
    EXPECT_TRUE(f.ok()) << f.status();
    EXPECT_TRUE(r.ok()) << r.status();
    const Pair p{f.ok() ? *f : 0, r.ok() ? *r : 0};
    std::printf("%-7s node0->node1 %10.2f Mbit/s   node1->node0 %10.2f Mbit/s\n", phase,
                p.forward * 8 / 1e6, p.reverse * 8 / 1e6);
    return p;
  }

  std::string QdiscShow(const cluster::NodeSpec& n) {
    absl::StatusOr<CommandResult> r =
        runner_->Run({"tc", "-n", n.netns, "qdisc", "show", "dev", n.iface});
    EXPECT_TRUE(r.ok() && r->exit_code == 0);
    return r.ok() ? r->stdout_text : "";
  }

  std::unique_ptr<Runner> runner_;
  std::unique_ptr<VethNamespaces> ns_;
  common::RealClock clock_;
};

TEST_F(LinkRealTest, OneDirectionCapSlowsOnlyThatDirection) {
  absl::StatusOr<std::unique_ptr<Driver>> driver =
      Driver::Create(ns_->cluster(), {}, runner_.get(), &clock_);
  ASSERT_TRUE(driver.ok()) << driver.status();
  const Pair before = Measure("before");

  absl::StatusOr<FaultSpec> spec = ParseFaultSpec("link:src=node0,dst=node1,rate=8mbit", 2);
  ASSERT_TRUE(spec.ok());
  absl::StatusOr<int> id = (*driver)->Apply(*spec);
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_THAT(QdiscShow(ns_->cluster().nodes[0]), HasSubstr("qdisc htb fa1c: root"));
  const Pair during = Measure("during");

  ASSERT_TRUE((*driver)->Remove(*id).ok());
  const Pair after = Measure("after");
  std::printf(
      "ratios: capped/uncapped during %.4f, capped during/before %.4f, uncapped "
      "during/before %.3f, capped after/during %.1f\n",
      during.forward / during.reverse, during.forward / before.forward,
      during.reverse / before.reverse, after.forward / during.forward);

  // The cap holds: at most the cap (plus a burst), far below the other direction measured at the
  // same time and the same direction before.
  EXPECT_LT(during.forward, 2 * kCapBytesPerSecond);
  EXPECT_LT(during.forward, 0.1 * during.reverse);
  EXPECT_LT(during.forward, 0.1 * before.forward);
  // The other direction is not capped (its ACKs cross the capped direction, hence a loose bound).
  EXPECT_GT(during.reverse, 10 * kCapBytesPerSecond);
  // Removed: the direction recovers and no qdisc of the driver is left.
  EXPECT_GT(after.forward, 10 * during.forward);
  for (const cluster::NodeSpec& n : ns_->cluster().nodes) {
    EXPECT_THAT(QdiscShow(n), Not(HasSubstr("fa1c:"))) << n.name;
  }
}

TEST_F(LinkRealTest, ClearRemovesWhatAKilledDriverLeft) {
  // A driver that dies without clean-up (here: its qdisc made by hand) leaves a qdisc.
  const cluster::NodeSpec& n0 = ns_->cluster().nodes[0];
  Tc tc(runner_.get());
  ASSERT_TRUE(tc.AddTbfRoot({n0.netns, n0.iface}, 8'000'000, 32768).ok());
  // Applying on that interface is refused with the hint.
  absl::StatusOr<std::unique_ptr<Driver>> driver =
      Driver::Create(ns_->cluster(), {}, runner_.get(), &clock_);
  ASSERT_TRUE(driver.ok());
  absl::StatusOr<int> id =
      (*driver)->Apply(*ParseFaultSpec("link:src=node0,dst=node1,rate=8mbit", 2));
  EXPECT_THAT(id.status().message(), HasSubstr("Exclusivity flag on"));
  EXPECT_THAT(id.status().message(), HasSubstr("falcon chaos clear"));

  ClearReport report = ClearCluster(ns_->cluster(), runner_.get());
  EXPECT_THAT(report.errors, ::testing::IsEmpty());
  EXPECT_THAT(report.removed, ::testing::Contains("qdisc fa1c: on " + n0.netns + "/" + n0.iface));
  EXPECT_THAT(QdiscShow(n0), Not(HasSubstr("fa1c:")));
  // Idempotent; and the driver applies now.
  report = ClearCluster(ns_->cluster(), runner_.get());
  EXPECT_THAT(report.errors, ::testing::IsEmpty());
  EXPECT_TRUE((*driver)->Apply(*ParseFaultSpec("link:src=node0,dst=node1,rate=8mbit", 2)).ok());
}

}  // namespace
}  // namespace falcon::chaos
