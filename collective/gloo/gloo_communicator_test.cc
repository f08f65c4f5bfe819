// Gloo backend over real processes (fork) and loopback TCP: every op on 2, 3, 4 and 8 ranks,
// sub-communicators, the observer, invalid arguments, dead and hung peers, link faults on exactly
// the ring steps that cross the slow link, and the pause point.
#include "collective/gloo/gloo_communicator.h"

#include <unistd.h>

#include <atomic>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "collective/fault/recording_sleeper.h"
#include "collective/testing/op_conformance.h"
#include "collective/testing/recording_observer.h"
#include "common/testing/multiprocess.h"
#include "gtest/gtest.h"

namespace falcon::collective::gloo {
namespace {

using ::falcon::collective::testing::CheckAllOps;
using ::falcon::collective::testing::CheckSplits;
using ::falcon::collective::testing::RecordingObserver;
using ::falcon::common::testing::Describe;
using ::falcon::common::testing::FreshDir;
using ::falcon::common::testing::RunRanksStatus;

#define RETURN_IF_ERROR(expr)                 \
  do {                                        \
    if (absl::Status _s = (expr); !_s.ok()) { \
      return _s;                              \
    }                                         \
  } while (false)

absl::Status Expect(bool cond, absl::string_view what) {
  return cond ? absl::OkStatus() : absl::InternalError(what);
}

absl::StatusOr<std::unique_ptr<Communicator>> World(int rank, int n, const std::string& dir,
                                                    std::shared_ptr<CommRuntime> runtime,
                                                    absl::Duration timeout = absl::Seconds(20)) {
  GlooWorldOptions o;
  o.rank = rank;
  o.world_size = n;
  o.rendezvous_dir = dir;
  o.timeout = timeout;
  return CreateGlooWorld(o, std::move(runtime));
}

std::shared_ptr<CommRuntime> Runtime(int rank) {
  CommRuntimeOptions o;
  o.rank = rank;
  return std::make_shared<CommRuntime>(o);
}

class GlooOpsTest : public ::testing::TestWithParam<int> {};

TEST_P(GlooOpsTest, EveryOpAndSplitIsCorrect) {
  const int n = GetParam();
  const std::string dir = FreshDir("ops");
  auto exits = RunRanksStatus(n, [&](int rank) -> absl::Status {
    auto world = World(rank, n, dir, Runtime(rank));
    if (!world.ok()) return world.status();
    RETURN_IF_ERROR(Expect((*world)->size() == n && (*world)->rank() == rank, "world shape"));
    RETURN_IF_ERROR(CheckAllOps(**world));
    return CheckSplits(**world);
  });
  for (const auto& e : exits) EXPECT_TRUE(e.ok()) << Describe(exits);
}

INSTANTIATE_TEST_SUITE_P(Ranks, GlooOpsTest, ::testing::Values(2, 3, 4, 8));

TEST(GlooCommunicatorTest, ObserverSeesEveryOpWithKindBytesPeerAndOrder) {
  const std::string dir = FreshDir("observer");
  auto exits = RunRanksStatus(2, [&](int rank) -> absl::Status {
    RecordingObserver observer;
    auto runtime = Runtime(rank);
    runtime->SetObserver(&observer);
    auto world = World(rank, 2, dir, runtime);
    if (!world.ok()) return world.status();
    Communicator& c = **world;
    std::vector<float> v(10, 1.0f), out(20);
    runtime->SetIteration(41);
    RETURN_IF_ERROR(
        c.AllReduce(HostBuffer(v.data(), 10), HostBuffer(v.data(), 10), ReduceOp::kSum));
    RETURN_IF_ERROR(c.AllGather(HostBuffer(v.data(), 10), HostBuffer(out.data(), 20)));
    RETURN_IF_ERROR(
        c.ReduceScatter(HostBuffer(out.data(), 20), HostBuffer(v.data(), 10), ReduceOp::kMax));
    RETURN_IF_ERROR(c.Broadcast(HostBuffer(v.data(), 5), 1));
    runtime->SetIteration(42);
    if (rank == 0) {
      RETURN_IF_ERROR(c.Send(HostBuffer(v.data(), 3), 1));
    } else {
      RETURN_IF_ERROR(c.Recv(HostBuffer(v.data(), 3), 0));
    }
    RETURN_IF_ERROR(c.Barrier());
    auto sub = c.Split(0, rank, CommLabel{CommKind::COMM_KIND_PP, "pp"});
    if (!sub.ok()) return sub.status();
    RETURN_IF_ERROR((*sub)->Barrier());

    const auto events = observer.events();
    RETURN_IF_ERROR(Expect(events.size() == 7, absl::StrCat("events: ", events.size())));
    const OpKind kinds[] = {OpKind::OP_KIND_ALL_REDUCE,
                            OpKind::OP_KIND_ALL_GATHER,
                            OpKind::OP_KIND_REDUCE_SCATTER,
                            OpKind::OP_KIND_BROADCAST,
                            rank == 0 ? OpKind::OP_KIND_SEND : OpKind::OP_KIND_RECV,
                            OpKind::OP_KIND_BARRIER,
                            OpKind::OP_KIND_BARRIER};
    const uint64_t bytes[] = {40, 40, 80, 20, 12, 0, 0};
    for (size_t i = 0; i < events.size(); ++i) {
      const OpEvent& e = events[i];
      RETURN_IF_ERROR(Expect(e.kind == kinds[i], absl::StrCat("kind of event ", i)));
      RETURN_IF_ERROR(Expect(e.bytes == bytes[i], absl::StrCat("bytes of event ", i)));
      RETURN_IF_ERROR(Expect(e.seq == i + 1, absl::StrCat("seq of event ", i)));
      RETURN_IF_ERROR(Expect(e.rank == rank && e.status_code == 0, "rank/status"));
      RETURN_IF_ERROR(Expect(e.host_end_ns >= e.host_start_ns && e.host_start_ns > 0, "times"));
      RETURN_IF_ERROR(Expect(e.device_duration_ns == 0, "no device time on gloo"));
      RETURN_IF_ERROR(Expect(e.iteration == (i < 4 ? 41 : 42), "iteration hint"));
      RETURN_IF_ERROR(Expect(e.comm_id == (i < 6 ? c.id() : (*sub)->id()), "comm id"));
      RETURN_IF_ERROR(Expect(e.peer == (i == 4 ? 1 - rank : -1), "peer"));
      RETURN_IF_ERROR(Expect(e.root == (i == 3 ? 1 : -1), "root"));
      if (i > 0) RETURN_IF_ERROR(Expect(e.host_start_ns >= events[i - 1].host_end_ns, "order"));
    }
    const auto comms = observer.comms();
    RETURN_IF_ERROR(Expect(comms.size() == 2, "two communicators announced"));
    RETURN_IF_ERROR(Expect(comms[0].comm_id == c.id() &&
                               comms[0].kind == CommKind::COMM_KIND_WORLD &&
                               comms[0].backend == "gloo" && comms[0].member_ranks.size() == 2,
                           "world announced"));
    RETURN_IF_ERROR(Expect(comms[1].comm_id == (*sub)->id() &&
                               comms[1].kind == CommKind::COMM_KIND_PP && comms[1].name == "pp" &&
                               comms[1].parent_comm_id == c.id(),
                           "split announced"));
    runtime->SetObserver(nullptr);
    return absl::OkStatus();
  });
  for (const auto& e : exits) EXPECT_TRUE(e.ok()) << Describe(exits);
}

TEST(GlooCommunicatorTest, InvalidArgumentsAreRejectedAndLeaveTheCommUsable) {
  const std::string dir = FreshDir("invalid");
  auto exits = RunRanksStatus(2, [&](int rank) -> absl::Status {
    auto world = World(rank, 2, dir, Runtime(rank));
    if (!world.ok()) return world.status();
    Communicator& c = **world;
    std::vector<float> a(4), b(6);
    Buffer device = HostBuffer(a.data(), 4);
    device.memory = MemoryKind::kDevice;
    const std::pair<absl::Status, std::string> cases[] = {
        {c.AllReduce(device, device, ReduceOp::kSum), "device memory"},
        {c.AllReduce(HostBuffer(a.data(), 4), HostBuffer(b.data(), 6), ReduceOp::kSum), "count"},
        {c.AllGather(HostBuffer(a.data(), 4), HostBuffer(b.data(), 6)), "all_gather"},
        {c.ReduceScatter(HostBuffer(b.data(), 6), HostBuffer(a.data(), 4), ReduceOp::kSum),
         "reduce_scatter"},
        {c.Broadcast(HostBuffer(a.data(), 4), 2), "root"},
        {c.Send(HostBuffer(a.data(), 4), rank), "self"},
        {c.Recv(HostBuffer(a.data(), 4), -1), "peer"},
        {c.Send(Buffer{nullptr, 3, DataType::kFloat32, MemoryKind::kHost}, 1 - rank), "data"},
    };
    for (const auto& [status, what] : cases) {
      RETURN_IF_ERROR(Expect(status.code() == absl::StatusCode::kInvalidArgument,
                             absl::StrCat(what, ": ", status.ToString())));
      RETURN_IF_ERROR(Expect(absl::StrContains(status.message(), "comm 0x"), "names the comm"));
    }
    RETURN_IF_ERROR(c.health());
    return c.Barrier();
  });
  for (const auto& e : exits) EXPECT_TRUE(e.ok()) << Describe(exits);
}

TEST(GlooCommunicatorTest, DeadRankGivesErrorNamingPeerNotHang) {
  const std::string dir = FreshDir("dead");
  auto exits = RunRanksStatus(
      3,
      [&](int rank) -> absl::Status {
        auto world = World(rank, 3, dir, Runtime(rank), absl::Seconds(10));
        if (!world.ok()) return world.status();
        Communicator& c = **world;
        RETURN_IF_ERROR(c.Barrier());
        if (rank == 2) _exit(0);  // Dies without closing anything.
        std::vector<float> v(1000, 1.0f);
        absl::Status s =
            c.AllReduce(HostBuffer(v.data(), 1000), HostBuffer(v.data(), 1000), ReduceOp::kSum);
        RETURN_IF_ERROR(Expect(!s.ok(), "all_reduce with a dead member succeeded"));
        RETURN_IF_ERROR(Expect(s.code() == absl::StatusCode::kUnavailable ||
                                   s.code() == absl::StatusCode::kDeadlineExceeded,
                               s.ToString()));
        RETURN_IF_ERROR(Expect(absl::StrContains(s.message(), "peer rank"), s.ToString()));
        RETURN_IF_ERROR(Expect(c.health().code() == s.code(), "health keeps the cause"));
        absl::Status again = c.Barrier();
        return Expect(again.code() == absl::StatusCode::kFailedPrecondition &&
                          absl::StrContains(again.message(), "broken"),
                      again.ToString());
      },
      absl::Seconds(30));
  EXPECT_TRUE(exits[0].ok() && exits[1].ok()) << Describe(exits);
}

TEST(GlooCommunicatorTest, HungPeerTimesOutNamingIt) {
  const std::string dir = FreshDir("hung");
  auto exits = RunRanksStatus(2, [&](int rank) -> absl::Status {
    auto world = World(rank, 2, dir, Runtime(rank), absl::Milliseconds(300));
    if (!world.ok()) return world.status();
    std::vector<int32_t> v(8);
    if (rank == 1) {
      absl::SleepFor(absl::Seconds(1));  // Alive but never posts the matching recv.
      return absl::OkStatus();
    }
    absl::Status s = (*world)->Recv(HostBuffer(v.data(), 8), 1);
    RETURN_IF_ERROR(Expect(s.code() == absl::StatusCode::kDeadlineExceeded, s.ToString()));
    return Expect(absl::StrContains(s.message(), "peer rank 1 (global 1)"), s.ToString());
  });
  for (const auto& e : exits) EXPECT_TRUE(e.ok()) << Describe(exits);
}

TEST(GlooCommunicatorTest, RendezvousTimesOutWhenARankNeverArrives) {
  const std::string dir = FreshDir("absent");
  auto exits = RunRanksStatus(1, [&](int) -> absl::Status {
    auto world = World(0, 2, dir, Runtime(0), absl::Milliseconds(300));
    return Expect(world.status().code() == absl::StatusCode::kDeadlineExceeded,
                  world.status().ToString());
  });
  EXPECT_TRUE(exits[0].ok()) << Describe(exits);
}

// A slow link 1 -> 2 in a 4-rank ring: only rank 1 shapes, once per ring step of all-reduce
// (2(n-1) steps), with the configured delay; only inside its iteration window; and real p2p
// sends 1 -> 2 take at least the delay while 2 -> 1 does not.
TEST(GlooCommunicatorTest, LinkFaultDelaysExactlyThatLink) {
  const std::string dir = FreshDir("link");
  auto exits = RunRanksStatus(4, [&](int rank) -> absl::Status {
    fault::RecordingSleeper recorder;
    CommRuntimeOptions o;
    o.rank = rank;
    fault::LinkFault f;
    f.src = 1;
    f.dst = 2;
    f.delay = absl::Milliseconds(7);
    f.window = {10, 20};
    o.link_faults = {f};
    o.link_sleeper = &recorder;
    auto runtime = std::make_shared<CommRuntime>(o);
    auto world = World(rank, 4, dir, runtime);
    if (!world.ok()) return world.status();
    Communicator& c = **world;
    std::vector<float> v(400, 1.0f);
    runtime->SetIteration(5);  // Outside the window.
    RETURN_IF_ERROR(
        c.AllReduce(HostBuffer(v.data(), 400), HostBuffer(v.data(), 400), ReduceOp::kSum));
    RETURN_IF_ERROR(Expect(recorder.spent().empty(), "shaped outside the window"));
    runtime->SetIteration(10);
    RETURN_IF_ERROR(
        c.AllReduce(HostBuffer(v.data(), 400), HostBuffer(v.data(), 400), ReduceOp::kSum));
    RETURN_IF_ERROR(Expect(v[0] == 16.0f, "all-reduce result"));
    const auto spent = recorder.spent();
    if (rank != 1) return Expect(spent.empty(), absl::StrCat("rank ", rank, " shaped"));
    RETURN_IF_ERROR(Expect(spent.size() == 6, absl::StrCat("steps shaped: ", spent.size())));
    for (absl::Duration d : spent) RETURN_IF_ERROR(Expect(d == absl::Milliseconds(7), "delay"));
    return absl::OkStatus();
  });
  for (const auto& e : exits) EXPECT_TRUE(e.ok()) << Describe(exits);
}

TEST(GlooCommunicatorTest, RealLinkDelayShowsInTimingsOfThatPairOnly) {
  const std::string dir = FreshDir("linkreal");
  constexpr int kN = 4;
  const absl::Duration delay = absl::Milliseconds(150);
  auto exits = RunRanksStatus(kN, [&](int rank) -> absl::Status {
    RecordingObserver observer;
    CommRuntimeOptions o;
    o.rank = rank;
    fault::LinkFault f;
    f.src = 2;
    f.dst = 3;
    f.delay = delay;
    o.link_faults = {f};
    auto runtime = std::make_shared<CommRuntime>(o);
    runtime->SetObserver(&observer);
    auto world = World(rank, kN, dir, runtime);
    if (!world.ok()) return world.status();
    Communicator& c = **world;
    std::vector<uint8_t> buf(1024, 1);
    for (int src = 0; src < kN; ++src) {
      for (int dst = 0; dst < kN; ++dst) {
        if (src == dst) continue;
        if (rank == src) RETURN_IF_ERROR(c.Send(HostBuffer(buf.data(), buf.size()), dst));
        if (rank == dst) RETURN_IF_ERROR(c.Recv(HostBuffer(buf.data(), buf.size()), src));
        RETURN_IF_ERROR(c.Barrier());
      }
    }
    for (const OpEvent& e : observer.events()) {
      if (e.kind != OpKind::OP_KIND_SEND) continue;
      const absl::Duration took = absl::Nanoseconds(e.host_end_ns - e.host_start_ns);
      const bool slow_link = rank == 2 && e.peer == 3;
      RETURN_IF_ERROR(
          Expect(slow_link == (took >= delay),
                 absl::StrCat("send ", rank, "->", e.peer, " took ", absl::FormatDuration(took))));
    }
    runtime->SetObserver(nullptr);
    return absl::OkStatus();
  });
  for (const auto& e : exits) EXPECT_TRUE(e.ok()) << Describe(exits);
}

// Every rank engages the gate before the same all-reduce; the all-reduce is held while a
// validation thread (bypassing the gate) exchanges messages on the same communicator; Resume()
// lets the all-reduce finish with the right result.
TEST(GlooCommunicatorTest, PauseHoldsNextOpUntilResumeWhileValidationRuns) {
  const std::string dir = FreshDir("pause");
  auto exits = RunRanksStatus(2, [&](int rank) -> absl::Status {
    RecordingObserver observer;
    auto runtime = Runtime(rank);
    runtime->SetObserver(&observer);
    auto world = World(rank, 2, dir, runtime);
    if (!world.ok()) return world.status();
    Communicator& c = **world;
    PauseGate& gate = runtime->pause_gate();
    gate.Pause();
    std::atomic<bool> reduced{false};
    absl::Status validation;
    std::thread validator([&] {
      PauseGate::ScopedBypass bypass(&gate);
      if (!gate.AwaitHeld(1, absl::Seconds(10))) {
        validation = absl::InternalError("training op never held");
        gate.Resume();
        return;
      }
      std::vector<int32_t> probe(64, rank);
      validation = rank == 0 ? c.Send(HostBuffer(probe.data(), 64), 1)
                             : c.Recv(HostBuffer(probe.data(), 64), 0);
      if (validation.ok() && reduced.load()) validation = absl::InternalError("op not held");
      if (validation.ok() && rank == 1 && probe[0] != 0) validation = absl::InternalError("probe");
      gate.Resume();
    });
    std::vector<float> v(100, static_cast<float>(rank + 1));
    absl::Status s =
        c.AllReduce(HostBuffer(v.data(), 100), HostBuffer(v.data(), 100), ReduceOp::kSum);
    reduced = true;
    validator.join();
    RETURN_IF_ERROR(validation);
    RETURN_IF_ERROR(s);
    RETURN_IF_ERROR(Expect(v[99] == 3.0f, "held all-reduce result"));
    const auto events = observer.events();
    RETURN_IF_ERROR(Expect(events.size() == 2 && events[0].kind != OpKind::OP_KIND_ALL_REDUCE &&
                               events[1].kind == OpKind::OP_KIND_ALL_REDUCE,
                           "validation op reported before the held op"));
    runtime->SetObserver(nullptr);
    return absl::OkStatus();
  });
  for (const auto& e : exits) EXPECT_TRUE(e.ok()) << Describe(exits);
}

}  // namespace
}  // namespace falcon::collective::gloo
