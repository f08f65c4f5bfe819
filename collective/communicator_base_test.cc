// CommunicatorBase with a fake single-process backend: argument checks, observer reports, seq,
// broken state after a transport error, the pause gate, Split bookkeeping, and no heap
// allocation on the op path.
#include "collective/communicator_base.h"

#include <atomic>
#include <cstdlib>
#include <new>
#include <thread>

#include "absl/strings/match.h"
#include "collective/testing/recording_observer.h"
#include "common/clock.h"
#include "gtest/gtest.h"

// Counts heap allocations made by this binary while `g_count_allocations` is set.
namespace {
std::atomic<bool> g_count_allocations{false};
std::atomic<int64_t> g_allocations{0};
}  // namespace

void* operator new(size_t n) {
  if (g_count_allocations.load(std::memory_order_relaxed)) g_allocations.fetch_add(1);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }

namespace falcon::collective {
namespace {

// A backend whose ops succeed at once (or fail with `next_error`) and whose Split sees a world
// of `size` members that all pass this member's (color, key) shifted by their rank.
class FakeComm : public CommunicatorBase {
 public:
  FakeComm(CommInfo info, std::shared_ptr<CommRuntime> runtime, common::FakeClock* clock)
      : CommunicatorBase(std::move(info), MemoryKind::kHost, std::move(runtime)), clock_(clock) {}

  absl::Status next_error;
  int do_calls = 0;

 protected:
  absl::Status Op() {
    ++do_calls;
    if (clock_ != nullptr) clock_->Advance(absl::Microseconds(5));
    absl::Status s = next_error;
    next_error = absl::OkStatus();
    return s;
  }
  absl::Status DoAllReduce(const Buffer&, const Buffer&, ReduceOp) override { return Op(); }
  absl::Status DoAllGather(const Buffer&, const Buffer&) override { return Op(); }
  absl::Status DoReduceScatter(const Buffer&, const Buffer&, ReduceOp) override { return Op(); }
  absl::Status DoBroadcast(const Buffer&, int) override { return Op(); }
  absl::Status DoSend(const Buffer&, int) override { return Op(); }
  absl::Status DoRecv(const Buffer&, int) override { return Op(); }
  absl::Status DoBarrier() override { return Op(); }
  absl::StatusOr<std::vector<std::pair<int, int>>> DoExchangeColorKey(int color, int key) override {
    std::vector<std::pair<int, int>> all;
    for (int r = 0; r < size(); ++r)
      all.emplace_back(r == rank() ? color : (r % 2), r == rank() ? key : r);
    return all;
  }
  absl::StatusOr<std::unique_ptr<CommunicatorBase>> DoSplit(int, int,
                                                            const std::optional<SplitGroup>& group,
                                                            CommInfo info) override {
    if (!group.has_value()) return std::unique_ptr<CommunicatorBase>();
    return std::unique_ptr<CommunicatorBase>(new FakeComm(info, shared_runtime(), clock_));
  }

 private:
  common::FakeClock* clock_;
};

CommInfo WorldInfo(int rank, int size) {
  CommInfo info;
  info.comm_id = 77;
  info.kind = CommKind::COMM_KIND_WORLD;
  info.name = "world";
  for (int r = 0; r < size; ++r) info.member_ranks.push_back(r + 10);  // Global ranks 10..
  info.comm_rank = rank;
  info.backend = "fake";
  return info;
}

struct Fixture {
  Fixture(int rank = 1, int size = 4) {
    CommRuntimeOptions o;
    o.rank = rank + 10;
    o.clock = &clock;
    runtime = std::make_shared<CommRuntime>(o);
    runtime->SetObserver(&observer);
    comm = std::make_unique<FakeComm>(WorldInfo(rank, size), runtime, &clock);
  }
  common::FakeClock clock;
  testing::RecordingObserver observer;
  std::shared_ptr<CommRuntime> runtime;
  std::unique_ptr<FakeComm> comm;
};

TEST(CommunicatorBaseTest, ReportsEveryOpWithFakeClockTimes) {
  Fixture f;
  float a[8] = {}, b[32] = {};
  f.runtime->SetIteration(3);
  ASSERT_TRUE(f.comm->AllReduce(HostBuffer(a, 8), HostBuffer(a, 8), ReduceOp::kSum).ok());
  ASSERT_TRUE(f.comm->AllGather(HostBuffer(a, 8), HostBuffer(b, 32)).ok());
  ASSERT_TRUE(f.comm->ReduceScatter(HostBuffer(b, 32), HostBuffer(a, 8), ReduceOp::kMin).ok());
  ASSERT_TRUE(f.comm->Broadcast(HostBuffer(a, 2), 3).ok());
  ASSERT_TRUE(f.comm->Send(HostBuffer(a, 1), 2).ok());
  ASSERT_TRUE(f.comm->Recv(HostBuffer(a, 1), 0).ok());
  ASSERT_TRUE(f.comm->Barrier().ok());
  const auto events = f.observer.events();
  ASSERT_EQ(events.size(), 7u);
  const uint64_t bytes[] = {32, 32, 128, 8, 4, 4, 0};
  for (size_t i = 0; i < events.size(); ++i) {
    EXPECT_EQ(events[i].seq, i + 1);
    EXPECT_EQ(events[i].bytes, bytes[i]) << i;
    EXPECT_EQ(events[i].comm_id, 77u);
    EXPECT_EQ(events[i].rank, 11);
    EXPECT_EQ(events[i].iteration, 3);
    EXPECT_EQ(events[i].host_end_ns - events[i].host_start_ns, 5000) << "fake clock step";
  }
  EXPECT_EQ(events[3].root, 13);  // Comm rank 3 -> global 13.
  EXPECT_EQ(events[4].peer, 12);
  EXPECT_EQ(events[5].peer, 10);
  EXPECT_EQ(events[5].kind, OpKind::OP_KIND_RECV);
}

TEST(CommunicatorBaseTest, InvalidArgumentsNeverReachTheBackend) {
  Fixture f;
  float a[8] = {};
  EXPECT_EQ(f.comm->AllReduce(HostBuffer(a, 8), HostBuffer(a, 7), ReduceOp::kSum).code(),
            absl::StatusCode::kInvalidArgument);
  int32_t i[8] = {};
  EXPECT_EQ(f.comm->AllReduce(HostBuffer(a, 8), HostBuffer(i, 8), ReduceOp::kSum).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(f.comm->AllGather(HostBuffer(a, 2), HostBuffer(a, 7)).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(f.comm->Broadcast(HostBuffer(a, 2), 4).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(f.comm->Send(HostBuffer(a, 2), 1).code(), absl::StatusCode::kInvalidArgument);
  absl::Status s = f.comm->Recv(HostBuffer(a, 2), 9);
  EXPECT_TRUE(absl::StrContains(s.message(), "comm 0x4d (world) rank 1 (global 11)")) << s;
  EXPECT_EQ(f.comm->do_calls, 0);
  EXPECT_TRUE(f.observer.events().empty());
  EXPECT_TRUE(f.comm->health().ok());
}

TEST(CommunicatorBaseTest, TransportErrorBreaksTheCommunicator) {
  Fixture f;
  f.comm->next_error = absl::UnavailableError("peer rank 2 gone");
  EXPECT_EQ(f.comm->Barrier().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(f.comm->health().code(), absl::StatusCode::kUnavailable);
  absl::Status again = f.comm->Barrier();
  EXPECT_EQ(again.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(again.message(), "peer rank 2 gone")) << again;
  EXPECT_EQ(f.comm->do_calls, 1);
  const auto events = f.observer.events();
  ASSERT_EQ(events.size(), 1u);  // The failing op is reported with its code.
  EXPECT_EQ(events[0].status_code, static_cast<int>(absl::StatusCode::kUnavailable));
}

TEST(CommunicatorBaseTest, SplitBuildsInfoAndAnnouncesIt) {
  Fixture f(/*rank=*/1, /*size=*/4);
  // Others use color r % 2 and key r: rank 1 joins color 1 with key -5 -> first in the group.
  auto sub = f.comm->Split(1, -5, CommLabel{CommKind::COMM_KIND_TP, "tp"});
  ASSERT_TRUE(sub.ok()) << sub.status();
  const CommInfo& info = (*sub)->info();
  EXPECT_EQ(info.member_ranks, (std::vector<int32_t>{11, 13}));
  EXPECT_EQ(info.comm_rank, 0);
  EXPECT_EQ(info.comm_id, SplitCommId(77, 1, 1));
  EXPECT_EQ(info.parent_comm_id, 77u);
  EXPECT_EQ(info.kind, CommKind::COMM_KIND_TP);
  const auto comms = f.observer.comms();
  ASSERT_EQ(comms.size(), 1u);
  EXPECT_EQ(comms[0].comm_id, info.comm_id);
  auto none = f.comm->Split(Communicator::kNoColor, 0);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(*none, nullptr);
  EXPECT_EQ(f.comm->Split(-3, 0).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(CommunicatorBaseTest, PausedGateHoldsOpsBeforeTheBackend) {
  Fixture f;
  f.runtime->pause_gate().Pause();
  std::thread t([&] { EXPECT_TRUE(f.comm->Barrier().ok()); });
  ASSERT_TRUE(f.runtime->pause_gate().AwaitHeld(1, absl::Seconds(10)));
  EXPECT_EQ(f.comm->do_calls, 0);
  f.runtime->pause_gate().Resume();
  t.join();
  EXPECT_EQ(f.comm->do_calls, 1);
}

class NullObserver : public OpObserver {
 public:
  void OnOp(const OpEvent& e) noexcept override { last_seq = e.seq; }
  uint64_t last_seq = 0;
};

TEST(CommunicatorBaseTest, OpPathAllocatesNothing) {
  CommRuntimeOptions o;
  o.rank = 0;
  auto runtime = std::make_shared<CommRuntime>(o);
  NullObserver observer;
  runtime->SetObserver(&observer);
  runtime->SetProfiling(true);
  FakeComm comm(WorldInfo(0, 2), runtime, nullptr);
  float a[4] = {};
  const Buffer buf = HostBuffer(a, 4);
  g_allocations = 0;
  g_count_allocations = true;
  for (int i = 0; i < 100; ++i) {
    (void)comm.AllReduce(buf, buf, ReduceOp::kSum);
    (void)comm.Send(buf, 1);
    (void)comm.Barrier();
  }
  g_count_allocations = false;
  EXPECT_EQ(g_allocations.load(), 0);
  EXPECT_EQ(observer.last_seq, 300u);
}

}  // namespace
}  // namespace falcon::collective
