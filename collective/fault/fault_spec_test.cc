#include "collective/fault/fault_spec.h"

#include <cstdlib>
#include <fstream>

#include "gtest/gtest.h"

namespace falcon::collective::fault {
namespace {

TEST(FaultSpecTest, ParsesEveryKind) {
  auto plan = ParseFaultSpec(
      "compute:rank=3,factor=1.5,from=100,to=300;"
      " link:src=2,dst=3,delay_ms=20,bw_mbps=500,from=50,to=200 ;"
      "contention:rank=1,workers=2,cpus=0+2-3,from=10");
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->compute.size(), 1u);
  EXPECT_EQ(plan->compute[0].rank, 3);
  EXPECT_DOUBLE_EQ(plan->compute[0].factor, 1.5);
  EXPECT_EQ(plan->compute[0].window.from, 100);
  EXPECT_EQ(plan->compute[0].window.to, 300);
  ASSERT_EQ(plan->links.size(), 1u);
  EXPECT_EQ(plan->links[0].src, 2);
  EXPECT_EQ(plan->links[0].dst, 3);
  EXPECT_EQ(plan->links[0].delay, absl::Milliseconds(20));
  EXPECT_DOUBLE_EQ(plan->links[0].bandwidth_mbps, 500);
  ASSERT_EQ(plan->contention.size(), 1u);
  EXPECT_EQ(plan->contention[0].workers, 2);
  EXPECT_EQ(plan->contention[0].cpus, (std::vector<int>{0, 2, 3}));
  EXPECT_EQ(plan->contention[0].window.to, IterationWindow::kForever);
}

TEST(FaultSpecTest, DefaultsCommentsNewlinesAndRoundTrip) {
  auto plan = ParseFaultSpec(
      "# a comment\nlink:src=0,dst=1,delay_ms=2.5\n\n;compute:rank=0,factor=2 # x\n");
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->links[0].delay, absl::Microseconds(2500));
  EXPECT_EQ(plan->links[0].bandwidth_mbps, 0);
  EXPECT_EQ(plan->links[0].window.from, 0);
  EXPECT_TRUE(plan->links[0].window.Contains(1'000'000'000));
  auto again = ParseFaultSpec(plan->ToString());
  ASSERT_TRUE(again.ok()) << again.status() << " for " << plan->ToString();
  EXPECT_EQ(again->ToString(), plan->ToString());
  EXPECT_TRUE(ParseFaultSpec("").value().empty());
  EXPECT_TRUE(ParseFaultSpec(" ; \n # only comments").value().empty());
}

TEST(FaultSpecTest, ErrorsNameItemAndField) {
  struct Case {
    const char* spec;
    const char* needle;
  } cases[] = {
      {"compute:rank=1", "fault 1 (compute): field 'factor': is required"},
      {"compute:rank=1,factor=0.5", "'factor': must be >= 1"},
      {"link:src=1,dst=1,delay_ms=3", "'dst': must differ from src"},
      {"link:src=1,dst=2", "one of delay_ms or bw_mbps"},
      {"link:src=1,dst=2,bw_mbps=0", "'bw_mbps': must be > 0"},
      {"compute:rank=0,factor=2;link:src=x,dst=2,delay_ms=1", "fault 2 (link): field 'src'"},
      {"compute:rank=0,factor=2,from=5,to=5", "'to': must be > from"},
      {"compute:rank=0,factor=2,speed=3", "'speed': unknown key"},
      {"compute:rank=0,rank=1,factor=2", "'rank': given twice"},
      {"disk:rank=0", "unknown kind 'disk'"},
      {"compute rank=0", "expected KIND:key=value"},
      {"compute:rank", "expected key=value"},
      {"contention:rank=0,cpus=3-1", "bad CPU list"},
      {"contention:rank=-1", "'rank': must be >= 0"},
  };
  for (const Case& c : cases) {
    auto plan = ParseFaultSpec(c.spec);
    ASSERT_FALSE(plan.ok()) << c.spec;
    EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(plan.status().message().find(c.needle), absl::string_view::npos)
        << c.spec << " -> " << plan.status();
  }
}

TEST(FaultSpecTest, LoadsFromFileWithAtPrefix) {
  const std::string path = std::string(std::getenv("TEST_TMPDIR")) + "/faults.txt";
  std::ofstream(path) << "link:src=0,dst=1,bw_mbps=100\n";
  auto plan = LoadFaultSpec("@" + path);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->links.size(), 1u);
  EXPECT_EQ(LoadFaultSpec("@/no/such/file").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(LoadFaultSpec("compute:rank=0,factor=3").value().compute.size(), 1u);
  // A directory read as an empty spec (no faults, no error); an endless file was read forever.
  const std::string dir = std::getenv("TEST_TMPDIR");
  EXPECT_EQ(LoadFaultSpec("@" + dir).status().message(),
            "fault spec file " + dir + ": is a directory, not a file");
  EXPECT_EQ(LoadFaultSpec("@/dev/zero").status().code(), absl::StatusCode::kResourceExhausted);
}

}  // namespace
}  // namespace falcon::collective::fault
