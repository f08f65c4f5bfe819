// The 1F1B pipeline schedule (PipeDream-Flush / Megatron-LM "1F1B"): stage s of P runs
// min(P-1-s, m) warm-up forward passes, then alternates one forward and one backward, then drains
// the remaining backward passes; so at most P-s micro-batches are in flight on stage s.
//
// Point-to-point ops are explicit so the trainer can run them with blocking Send/Recv
// (collective/communicator.h). In the steady phase the receive of the next forward input comes
// before the send of the backward gradient (Megatron's send_backward_recv_forward), which makes
// the sequence of ops on every link (s, s+1) identical on both ends:
//   SendFwd^w (SendFwd RecvBwd)^(m-w) RecvBwd^w   on s,   mirrored on s+1,
// so blocking (even rendezvous) point-to-point cannot deadlock.
//
// Pure functions; thread-safe.
#ifndef FALCON_TRAINER_SCHEDULE_SCHEDULE_H_
#define FALCON_TRAINER_SCHEDULE_SCHEDULE_H_

#include <string>
#include <vector>

namespace falcon::trainer::schedule {

enum class PipeOpKind {
  kRecvForward,   // Receive micro-batch `micro`'s input activation from stage s-1.
  kForward,       // Forward pass of `micro`.
  kSendForward,   // Send its output activation to stage s+1.
  kRecvBackward,  // Receive the gradient of its output from stage s+1.
  kBackward,      // Backward pass of `micro`.
  kSendBackward,  // Send the gradient of its input to stage s-1.
};

struct PipeOp {
  PipeOpKind kind;
  int micro;  // Local micro-batch index, [0, m).
  bool operator==(const PipeOp& o) const { return kind == o.kind && micro == o.micro; }
};

// Ops of stage `stage` (0 <= stage < pp) for `m` >= 0 micro-batches. Stage 0 has no receive of
// forward input and no send of backward gradient; the last stage no send of forward output and
// no receive of backward gradient.
std::vector<PipeOp> OneFOneBSchedule(int pp, int stage, int m);

// "F3" / "B0" / "rf1" / "sf1" / "rb0" / "sb0", joined by spaces: for tests and logs.
std::string ScheduleToString(const std::vector<PipeOp>& ops);

}  // namespace falcon::trainer::schedule

#endif  // FALCON_TRAINER_SCHEDULE_SCHEDULE_H_
