#include "trainer/schedule/schedule.h"

#include <deque>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace falcon::trainer::schedule {
namespace {

TEST(ScheduleTest, MatchesTheClassic1F1BOrderOnFourStages) {
  EXPECT_EQ(ScheduleToString(OneFOneBSchedule(4, 0, 4)),
            "F0 sf0 F1 sf1 F2 sf2 F3 sf3 rb0 B0 rb1 B1 rb2 B2 rb3 B3");
  EXPECT_EQ(ScheduleToString(OneFOneBSchedule(4, 3, 4)),
            "rf0 F0 B0 rf1 sb0 F1 B1 rf2 sb1 F2 B2 rf3 sb2 F3 B3 sb3");
  EXPECT_EQ(ScheduleToString(OneFOneBSchedule(2, 0, 4)),
            "F0 sf0 F1 sf1 rb0 B0 F2 sf2 rb1 B1 F3 sf3 rb2 B2 rb3 B3");
  EXPECT_EQ(ScheduleToString(OneFOneBSchedule(1, 0, 2)), "F0 B0 F1 B1");
  EXPECT_EQ(ScheduleToString(OneFOneBSchedule(3, 1, 0)), "");
}

// Runs every stage's schedule with rendezvous (fully synchronous) send/recv: a send completes
// only together with the matching receive. Returns false on deadlock.
bool SimulateRendezvous(int pp, int m, int* max_in_flight_stage0) {
  std::vector<std::vector<PipeOp>> ops(pp);
  for (int s = 0; s < pp; ++s) ops[s] = OneFOneBSchedule(pp, s, m);
  std::vector<size_t> pc(pp, 0);
  std::vector<std::set<int>> forwarded(pp), backwarded(pp);
  std::vector<std::set<int>> have_input(pp), have_grad(pp);
  *max_in_flight_stage0 = 0;
  auto done = [&] {
    for (int s = 0; s < pp; ++s) {
      if (pc[s] < ops[s].size()) return false;
    }
    return true;
  };
  while (!done()) {
    bool progress = false;
    for (int s = 0; s < pp; ++s) {
      if (pc[s] >= ops[s].size()) continue;
      const PipeOp op = ops[s][pc[s]];
      switch (op.kind) {
        case PipeOpKind::kForward:
          if (s > 0 && !have_input[s].count(op.micro)) return false;  // Used before received.
          forwarded[s].insert(op.micro);
          ++pc[s];
          progress = true;
          break;
        case PipeOpKind::kBackward:
          if (!forwarded[s].count(op.micro)) return false;
          if (s < pp - 1 && !have_grad[s].count(op.micro)) return false;
          backwarded[s].insert(op.micro);
          ++pc[s];
          progress = true;
          break;
        case PipeOpKind::kSendForward: {
          if (!forwarded[s].count(op.micro)) return false;
          const size_t peer_pc = pc[s + 1];
          if (peer_pc < ops[s + 1].size() &&
              ops[s + 1][peer_pc] == PipeOp{PipeOpKind::kRecvForward, op.micro}) {
            have_input[s + 1].insert(op.micro);
            ++pc[s];
            ++pc[s + 1];
            progress = true;
          }
          break;
        }
        case PipeOpKind::kSendBackward: {
          if (!backwarded[s].count(op.micro)) return false;
          const size_t peer_pc = pc[s - 1];
          if (peer_pc < ops[s - 1].size() &&
              ops[s - 1][peer_pc] == PipeOp{PipeOpKind::kRecvBackward, op.micro}) {
            have_grad[s - 1].insert(op.micro);
            ++pc[s];
            ++pc[s - 1];
            progress = true;
          }
          break;
        }
        case PipeOpKind::kRecvForward:
        case PipeOpKind::kRecvBackward:
          break;  // Completed by the sender.
      }
    }
    const int in_flight =
        static_cast<int>(forwarded[0].size()) - static_cast<int>(backwarded[0].size());
    *max_in_flight_stage0 = std::max(*max_in_flight_stage0, in_flight);
    if (!progress) return false;
  }
  for (int s = 0; s < pp; ++s) {
    if (static_cast<int>(backwarded[s].size()) != m) return false;
  }
  return true;
}

TEST(ScheduleTest, NeverDeadlocksWithRendezvousPointToPoint) {
  for (int pp = 1; pp <= 6; ++pp) {
    for (int m = 0; m <= 13; ++m) {
      int in_flight = 0;
      EXPECT_TRUE(SimulateRendezvous(pp, m, &in_flight)) << "pp=" << pp << " m=" << m;
      EXPECT_LE(in_flight, pp) << "pp=" << pp << " m=" << m;
    }
  }
}

TEST(ScheduleTest, EveryMicroBatchRunsForwardThenBackwardOnce) {
  for (int pp = 1; pp <= 5; ++pp) {
    for (int s = 0; s < pp; ++s) {
      const int m = 3 * pp;
      std::map<int, int> state;  // 0 none, 1 forwarded, 2 done
      int max_in_flight = 0, in_flight = 0;
      for (const PipeOp& op : OneFOneBSchedule(pp, s, m)) {
        if (op.kind == PipeOpKind::kForward) {
          EXPECT_EQ(state[op.micro], 0);
          state[op.micro] = 1;
          max_in_flight = std::max(max_in_flight, ++in_flight);
        } else if (op.kind == PipeOpKind::kBackward) {
          EXPECT_EQ(state[op.micro], 1);
          state[op.micro] = 2;
          --in_flight;
        }
      }
      EXPECT_EQ(static_cast<int>(state.size()), m);
      for (const auto& [micro, st] : state) EXPECT_EQ(st, 2) << micro;
      EXPECT_EQ(max_in_flight, pp - s) << "pp=" << pp << " stage=" << s;
    }
  }
}

}  // namespace
}  // namespace falcon::trainer::schedule
