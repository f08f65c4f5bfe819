#include "chaos/fault_spec.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace falcon::chaos {
namespace {

using ::testing::HasSubstr;

constexpr int kCpus = 2;

FaultSpec Parse(const std::string& text) {
  absl::StatusOr<FaultSpec> s = ParseFaultSpec(text, kCpus);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *s : FaultSpec{};
}

std::string Error(const std::string& text) {
  absl::StatusOr<FaultSpec> s = ParseFaultSpec(text, kCpus);
  EXPECT_FALSE(s.ok()) << text;
  if (s.ok()) return "";
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument) << s.status();
  return std::string(s.status().message());
}

TEST(FaultSpecTest, LinkByNodes) {
  const FaultSpec f = Parse("  link:src=node0,dst=node1,rate=2mbit  ");
  EXPECT_EQ(f.text, "link:src=node0,dst=node1,rate=2mbit");
  EXPECT_EQ(f.kind, FaultKind::kLink);
  EXPECT_EQ(f.src.node, "node0");
  EXPECT_FALSE(f.src.rank.has_value());
  EXPECT_EQ(f.dst.node, "node1");
  EXPECT_FALSE(f.both);
  EXPECT_EQ(f.rate_bit_per_second, 2'000'000);
  EXPECT_EQ(f.burst_bytes, kDefaultBurstBytes);
  EXPECT_EQ(f.from, absl::ZeroDuration());
  EXPECT_FALSE(f.until.has_value());
}

TEST(FaultSpecTest, LinkByRanksWithEverything) {
  const FaultSpec f =
      Parse("link: src_rank = 3, dst_rank=5, rate=2.5Mbit, burst=64kb, both, from=10, until=40.5");
  ASSERT_TRUE(f.src.rank.has_value());
  EXPECT_EQ(*f.src.rank, 3);
  EXPECT_EQ(*f.dst.rank, 5);
  EXPECT_TRUE(f.src.node.empty());
  EXPECT_TRUE(f.both);
  EXPECT_EQ(f.rate_bit_per_second, 2'500'000);
  EXPECT_EQ(f.burst_bytes, 64 * 1024);
  EXPECT_EQ(f.from, absl::Seconds(10));
  EXPECT_EQ(f.until, absl::Milliseconds(40500));
}

TEST(FaultSpecTest, MixedEndpointsAndUnits) {
  const FaultSpec f = Parse("link:src=node0,dst_rank=7,rate=500kbit,burst=4096");
  EXPECT_EQ(f.src.node, "node0");
  EXPECT_EQ(*f.dst.rank, 7);
  EXPECT_EQ(f.rate_bit_per_second, 500'000);
  EXPECT_EQ(f.burst_bytes, 4096);
  EXPECT_EQ(Parse("link:src=a,dst=b,rate=1gbit,burst=1mb").burst_bytes, 1 << 20);
  EXPECT_EQ(Parse("link:src=a,dst=b,rate=3000bit,burst=2kb").rate_bit_per_second, 3000);
}

TEST(FaultSpecTest, DefaultBurstGrowsWithTheRate) {
  // 1 ms at 10 gbit is 1.25 MB, above the 32 KiB floor.
  EXPECT_EQ(Parse("nic:node=n,rate=10gbit").burst_bytes, 1'250'000);
  EXPECT_EQ(Parse("nic:node=n,rate=100mbit").burst_bytes, kDefaultBurstBytes);
}

TEST(FaultSpecTest, Nic) {
  const FaultSpec f = Parse("nic:node=node2,rate=5mbit,burst=16kb,from=1");
  EXPECT_EQ(f.kind, FaultKind::kNic);
  EXPECT_EQ(f.node, "node2");
  EXPECT_EQ(f.rate_bit_per_second, 5'000'000);
  EXPECT_EQ(f.burst_bytes, 16 * 1024);
  EXPECT_EQ(f.from, absl::Seconds(1));
}

TEST(FaultSpecTest, Compute) {
  FaultSpec f = Parse("compute:rank=5,quota=0.3");
  EXPECT_EQ(f.kind, FaultKind::kCompute);
  EXPECT_EQ(*f.process.rank, 5);
  EXPECT_FALSE(f.process.pid.has_value());
  EXPECT_DOUBLE_EQ(f.quota_cores, 0.3);
  EXPECT_EQ(f.period, absl::Milliseconds(100));
  f = Parse("compute:pid=1234,quota=2,period=10ms,until=5");
  EXPECT_EQ(*f.process.pid, 1234);
  EXPECT_EQ(f.period, absl::Milliseconds(10));
  EXPECT_EQ(Parse("compute:pid=1,quota=1,period=1s").period, absl::Seconds(1));
  EXPECT_EQ(Parse("compute:pid=1,quota=1,period=2500us").period, absl::Microseconds(2500));
}

TEST(FaultSpecTest, ComputeBySlowdown) {
  const FaultSpec f = Parse("compute:rank=2,slowdown=1.5");
  ASSERT_TRUE(f.slowdown.has_value());
  EXPECT_DOUBLE_EQ(*f.slowdown, 1.5);
  EXPECT_EQ(f.quota_cores, 0);
  EXPECT_EQ(*Parse("compute:pid=3,slowdown=100,period=10ms").slowdown, 100);
  EXPECT_FALSE(Parse("compute:pid=3,quota=1").slowdown.has_value());
  EXPECT_THAT(Error("compute:rank=1,quota=0.5,slowdown=2"),
              HasSubstr("quota: give quota or slowdown, not both"));
  EXPECT_THAT(Error("compute:rank=1,slowdown=1"),
              HasSubstr("slowdown: 1 is outside (1, 100] (a factor: the process gets 1/F of the "
                        "CPU it used)"));
  EXPECT_THAT(Error("compute:rank=1,slowdown=101"), HasSubstr("outside (1, 100]"));
  EXPECT_THAT(Error("compute:rank=1,slowdown=x"), HasSubstr("slowdown: 'x' is not a number"));
}

TEST(FaultSpecTest, ComputeOfOneThread) {
  FaultSpec f = Parse("compute:rank=1,thread=falcon-device,quota=0.05");
  EXPECT_EQ(f.thread, "falcon-device");
  EXPECT_DOUBLE_EQ(f.quota_cores, 0.05);
  f = Parse("compute:pid=7,slowdown=2,thread=falcon-device,period=20ms");
  EXPECT_EQ(f.thread, "falcon-device");
  EXPECT_EQ(*f.slowdown, 2);
  EXPECT_EQ(Parse("compute:pid=7,quota=1").thread, "");
  EXPECT_EQ(Parse("compute:pid=7,quota=1,thread=abcdefghijklmno").thread, "abcdefghijklmno");
  EXPECT_THAT(Error("compute:pid=7,quota=1,thread="), HasSubstr("thread: expected key=value"));
  EXPECT_THAT(Error("compute:pid=7,quota=1,thread"), HasSubstr("thread: expected key=value"));
  EXPECT_THAT(Error("compute:pid=7,quota=1,thread=a,thread=b"), HasSubstr("thread: given twice"));
  EXPECT_THAT(Error("compute:pid=7,quota=1,thread=abcdefghijklmnop"),
              HasSubstr("thread: 'abcdefghijklmnop' is longer than 15 bytes"));
  EXPECT_THAT(Error("compute:pid=7,quota=1,threads=a"), HasSubstr("threads: unknown key"));
  EXPECT_THAT(Error("contention:pid=7,thread=a"), HasSubstr("thread: unknown key"));
}

TEST(FaultSpecTest, Contention) {
  FaultSpec f = Parse("contention:rank=5");
  EXPECT_EQ(f.kind, FaultKind::kContention);
  EXPECT_EQ(*f.process.rank, 5);
  EXPECT_EQ(f.workers, 1);
  EXPECT_EQ(Parse("contention:pid=9,workers=3").workers, 3);
}

TEST(FaultSpecTest, KindAndSyntaxErrors) {
  EXPECT_THAT(Error("link"), HasSubstr("kind: expected KIND:key=value"));
  EXPECT_THAT(Error("delay:src=a,dst=b"), HasSubstr("unknown kind 'delay'"));
  EXPECT_THAT(Error("link:src=a,,dst=b,rate=1mbit"), HasSubstr("empty field"));
  EXPECT_THAT(Error("link:src=a,dst=b,rate"), HasSubstr("rate: expected key=value"));
  EXPECT_THAT(Error("link:src=a,dst=b,rate=1mbit,both=yes"), HasSubstr("both: takes no value"));
}

TEST(FaultSpecTest, UnknownAndDuplicateKeys) {
  const std::string unknown = Error("link:src=a,dst=b,rate=1mbit,delay=5ms");
  EXPECT_THAT(unknown,
              HasSubstr("fault 'link:src=a,dst=b,rate=1mbit,delay=5ms': delay: unknown key"));
  EXPECT_THAT(unknown, HasSubstr("known: both, burst, dst"));
  EXPECT_THAT(Error("nic:node=a,node=b,rate=1mbit"), HasSubstr("node: given twice"));
  EXPECT_THAT(Error("compute:rank=1,quota=0.5,rank=2"), HasSubstr("rank: given twice"));
  EXPECT_THAT(Error("compute:rank=1,quota=0.5,workers=2"), HasSubstr("workers: unknown key"));
}

TEST(FaultSpecTest, LinkEndpoints) {
  EXPECT_THAT(Error("link:dst=b,rate=1mbit"), HasSubstr("src: required"));
  EXPECT_THAT(Error("link:src=a,rate=1mbit"), HasSubstr("dst: required"));
  EXPECT_THAT(Error("link:src=a,src_rank=1,dst=b,rate=1mbit"),
              HasSubstr("src: give src or src_rank, not both"));
  EXPECT_THAT(Error("link:src=a,dst=a,rate=1mbit"), HasSubstr("dst: equals src ('a')"));
  EXPECT_THAT(Error("link:src_rank=4,dst_rank=4,rate=1mbit"),
              HasSubstr("dst_rank: equals src_rank"));
  EXPECT_THAT(Error("link:src_rank=-1,dst=b,rate=1mbit"),
              HasSubstr("src_rank: -1 is out of range"));
  EXPECT_THAT(Error("link:src_rank=x,dst=b,rate=1mbit"),
              HasSubstr("src_rank: 'x' is not an integer"));
}

TEST(FaultSpecTest, Rates) {
  EXPECT_THAT(Error("link:src=a,dst=b"), HasSubstr("rate: required"));
  EXPECT_THAT(Error("link:src=a,dst=b,rate=0mbit"),
              HasSubstr("rate: '0mbit' is outside [1kbit, 100gbit]"));
  EXPECT_THAT(Error("link:src=a,dst=b,rate=101gbit"), HasSubstr("outside [1kbit, 100gbit]"));
  EXPECT_THAT(Error("link:src=a,dst=b,rate=999bit"), HasSubstr("outside"));
  EXPECT_THAT(Error("link:src=a,dst=b,rate=8"), HasSubstr("rate: '8' is not a rate"));
  EXPECT_THAT(Error("link:src=a,dst=b,rate=8mbps"), HasSubstr("not a rate"));
  EXPECT_THAT(Error("link:src=a,dst=b,rate=-1mbit"), HasSubstr("not a rate"));
  EXPECT_EQ(Parse("link:src=a,dst=b,rate=100gbit").rate_bit_per_second, 100'000'000'000);
}

TEST(FaultSpecTest, Bursts) {
  EXPECT_THAT(Error("nic:node=a,rate=1mbit,burst=1kb"),
              HasSubstr("burst: '1kb' is outside [2kb, 64mb]"));
  EXPECT_THAT(Error("nic:node=a,rate=1mbit,burst=65mb"), HasSubstr("outside"));
  EXPECT_THAT(Error("nic:node=a,rate=1mbit,burst=32kbit"),
              HasSubstr("burst: '32kbit' is not a size"));
  EXPECT_THAT(Error("nic:rate=1mbit"), HasSubstr("node: required"));
}

TEST(FaultSpecTest, ComputeErrors) {
  EXPECT_THAT(Error("compute:quota=0.5"), HasSubstr("rank: required (rank=RANK or pid=PID)"));
  EXPECT_THAT(Error("compute:rank=1,pid=2,quota=0.5"), HasSubstr("give rank or pid, not both"));
  EXPECT_THAT(Error("compute:rank=1"),
              HasSubstr("quota: required (quota=CORES, e.g. 0.3, or slowdown=F, e.g. 1.5)"));
  EXPECT_THAT(Error("compute:rank=1,quota=0"), HasSubstr("quota: 0 cores is outside (0, 2]"));
  EXPECT_THAT(Error("compute:rank=1,quota=-0.5"), HasSubstr("outside (0, 2]"));
  EXPECT_THAT(Error("compute:rank=1,quota=3"),
              HasSubstr("3 cores is outside (0, 2] (this machine's CPUs)"));
  EXPECT_THAT(Error("compute:rank=1,quota=nan"), HasSubstr("quota: 'nan' is not a number"));
  EXPECT_THAT(Error("compute:rank=1,quota=0.05,period=10ms"),
              HasSubstr("below the kernel's minimum quota of 1ms"));
  EXPECT_THAT(Error("compute:rank=1,quota=0.5,period=500us"),
              HasSubstr("period: '500us' is outside [1ms, 1s]"));
  EXPECT_THAT(Error("compute:rank=1,quota=0.5,period=2s"), HasSubstr("outside [1ms, 1s]"));
  EXPECT_THAT(Error("compute:rank=1,quota=0.5,period=10"),
              HasSubstr("period: '10' is not a duration"));
  EXPECT_THAT(Error("compute:pid=0,quota=0.5"), HasSubstr("pid: 0 is out of range"));
}

TEST(FaultSpecTest, ContentionErrors) {
  EXPECT_THAT(Error("contention:rank=1,workers=0"),
              HasSubstr("workers: 0 is out of range [1, 1024]"));
  EXPECT_THAT(Error("contention:workers=2"), HasSubstr("rank: required"));
}

TEST(FaultSpecTest, Times) {
  EXPECT_THAT(Error("contention:rank=1,from=-1"),
              HasSubstr("from: -1 is outside [0, 1e6] seconds"));
  EXPECT_THAT(Error("contention:rank=1,from=x"), HasSubstr("from: 'x' is not a number of seconds"));
  EXPECT_THAT(Error("contention:rank=1,from=10,until=10"),
              HasSubstr("until: 10 s is not after from (10 s)"));
  EXPECT_THAT(Error("contention:rank=1,until=0"), HasSubstr("until: 0 s is not after from"));
  EXPECT_THAT(Error("contention:rank=1,until=0.0001"),
              HasSubstr("until: 0.0001 s is not after from (0 s) at millisecond resolution"));
  EXPECT_EQ(*Parse("contention:rank=1,until=0.25").until, absl::Milliseconds(250));
}

TEST(FaultSpecTest, Names) {
  EXPECT_EQ(FaultKindName(FaultKind::kLink), "link");
  EXPECT_EQ(FaultKindName(FaultKind::kNic), "nic");
  EXPECT_EQ(FaultKindName(FaultKind::kCompute), "compute");
  EXPECT_EQ(FaultKindName(FaultKind::kContention), "contention");
  EXPECT_EQ(RateString(8'000'000), "8mbit");
  EXPECT_EQ(RateString(2'500'000), "2500kbit");
  EXPECT_EQ(RateString(1'000'000'000), "1gbit");
  EXPECT_EQ(RateString(1500), "1500bit");
  EXPECT_GE(OnlineCpus(), 1);
}

}  // namespace
}  // namespace falcon::chaos
