// Fault-injection plans for tests and the demo: compute slowdowns, slow links and CPU contention,
// each active during a window of iterations. Parsed from a spec string (a flag, or FALCON_FAULTS
// set by falcon_launch) or from a file.
//
// Grammar (whitespace around tokens is ignored):
//   spec   := item { (';' | newline) item }      empty items and '#'-to-end-of-line comments ok
//   item   := kind ':' field { ',' field }
//   field  := key '=' value
//   compute:    rank=R factor=F [from=I] [to=J]
//       Rank R's compute takes F times as long (F >= 1) in iterations [I, J).
//   link:       src=S dst=D [delay_ms=T] [bw_mbps=B] [from=I] [to=J]
//       Sends from global rank S to global rank D get T ms extra latency per message (T >= 0)
//       and/or are capped at B megabits/s (B > 0; 1 Mbit = 1e6 bits); at least one is required.
//       Directed: D -> S is unaffected.
//   contention: rank=R [workers=W] [cpus=LIST] [from=I] [to=J]
//       W stress-ng CPU workers (default 1) run on LIST (default: rank R's CPU affinity) during
//       [I, J). LIST is CPU ids or ranges joined by '+', e.g. 0+2-3.
// Windows: from defaults to 0, to to forever; an iteration i is inside when from <= i < to.
// Ranks are global ranks >= 0. Unknown kinds or keys, duplicates and bad numbers are errors.
//
// Example: "compute:rank=3,factor=1.5,from=100,to=300; link:src=2,dst=3,delay_ms=20,bw_mbps=500"
#ifndef FALCON_COLLECTIVE_FAULT_FAULT_SPEC_H_
#define FALCON_COLLECTIVE_FAULT_FAULT_SPEC_H_

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace falcon::collective::fault {

// Iterations [from, to).
struct IterationWindow {
  static constexpr int64_t kForever = std::numeric_limits<int64_t>::max();
  int64_t from = 0;
  int64_t to = kForever;
  bool Contains(int64_t iteration) const { return iteration >= from && iteration < to; }
};

struct ComputeFault {
  int rank = 0;
  double factor = 1.0;  // >= 1.
  IterationWindow window;
};

struct LinkFault {
  int src = 0;                                  // Sending global rank.
  int dst = 0;                                  // Receiving global rank; != src.
  absl::Duration delay = absl::ZeroDuration();  // Extra latency per message.
  double bandwidth_mbps = 0;                    // Megabits/s cap; 0 = uncapped.
  IterationWindow window;
};

struct ContentionFault {
  int rank = 0;
  int workers = 1;
  std::vector<int> cpus;  // Empty: the rank's CPU affinity.
  IterationWindow window;
};

struct FaultPlan {
  std::vector<ComputeFault> compute;
  std::vector<LinkFault> links;
  std::vector<ContentionFault> contention;

  bool empty() const { return compute.empty() && links.empty() && contention.empty(); }
  // The plan in canonical spec syntax (parses back to an equal plan).
  std::string ToString() const;
};

// Parses `spec` (grammar above). kInvalidArgument naming the item number (1-based), kind and
// field on any error.
absl::StatusOr<FaultPlan> ParseFaultSpec(absl::string_view spec);

// Fault spec files are small; a larger one is refused (kResourceExhausted).
inline constexpr uint64_t kMaxFaultSpecBytes = uint64_t{1} << 20;

// `flag` is either a spec or "@PATH" naming a file that holds one. kNotFound when the file cannot
// be read, kInvalidArgument for a directory, kResourceExhausted above kMaxFaultSpecBytes
// (common::ReadTextFile, the message starting "fault spec file PATH: "); otherwise as
// ParseFaultSpec.
absl::StatusOr<FaultPlan> LoadFaultSpec(absl::string_view flag);

}  // namespace falcon::collective::fault

#endif  // FALCON_COLLECTIVE_FAULT_FAULT_SPEC_H_
