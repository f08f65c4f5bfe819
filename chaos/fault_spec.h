// Fault specs of the fault driver (falcon_chaos, chaos/driver.h): kernel-level fail-slows applied
// from outside a running job on a test cluster (cluster/cluster_spec.h). One spec per fault:
//
//   link:src=NODE,dst=NODE,rate=RATE[,burst=SIZE][,both]
//       Caps traffic from node src to node dst at RATE: an htb class with a u32 filter on the
//       destination address, on the sender's interface inside the sender's namespace. `both`
//       also caps dst -> src the same way. Instead of a node, a side may name a rank:
//       src_rank=R / dst_rank=R (its node from the rank table when the fault is applied).
//   nic:node=NODE,rate=RATE[,burst=SIZE]
//       The whole node's NIC degraded: tbf on the node's interface (traffic out of the node) and
//       on its host-side veth (traffic into the node).
//   compute:rank=R|pid=P,quota=CORES|slowdown=F[,period=DURATION][,thread=NAME]
//       The process (all its threads) in a fresh cgroup whose CPU quota is CORES cores
//       (0.3 = 30% of one CPU) per period (default 100ms, the kernel's default). slowdown=F
//       instead: the quota is the CPU the process used just before (measured when the fault is
//       applied) divided by F, so that CPU-bound work takes F times as long; where that share
//       is below 1 ms per period, the period is lengthened (up to 1 s) to carry it.
//       thread=NAME: only the process's threads named NAME (/proc/PID/task/TID/comm) join the
//       cgroup, and
//       slowdown=F measures those threads only: a slow device (its kernels) rather than a slow
//       host (cgroup v1 only; cgroup.h).
//   contention:rank=R|pid=P[,workers=W]
//       W stress-ng CPU workers (default 1) pinned to the process's allowed CPUs, at its niceness.
//   Every kind: from=SECONDS (default 0) and until=SECONDS (default: until the driver stops),
//   relative to the driver's start; decimals allowed.
//
// Values:
//   RATE      a decimal number with unit bit, kbit, mbit or gbit (1 kbit = 1000 bit/s, as tc);
//             1kbit ≤ RATE ≤ 100gbit.
//   SIZE      bytes: a number with unit b, kb or mb (1 kb = 1024 bytes, as tc), or a bare number;
//             2kb ≤ SIZE ≤ 64mb (at least one full-size frame). Default max(32kb, 1 ms at RATE).
//   CORES     > 0 and ≤ the machine's CPU count; CORES × period ≥ 1 ms (the kernel's minimum
//             quota).
//   DURATION  a number with unit us, ms or s; 1ms ≤ period ≤ 1s (the kernel's bounds).
//   F         above 1, at most 100.
//   W         1..1024.
//   NAME      a thread name: 1 to 15 bytes (the kernel's limit), compared exactly.
//   NODE      a node name of the cluster (checked when the fault is resolved, not here).
//
// Errors: kInvalidArgument "fault 'SPEC': FIELD: WHAT" for an unknown kind or key, a key given
// twice, a malformed or out-of-range value, a missing required key, a side given both as node and
// as rank, src equal to dst, until ≤ from.
#ifndef FALCON_CHAOS_FAULT_SPEC_H_
#define FALCON_CHAOS_FAULT_SPEC_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace falcon::chaos {

enum class FaultKind { kLink, kNic, kCompute, kContention };

// "link", "nic", "compute", "contention".
absl::string_view FaultKindName(FaultKind kind);

// One side of a link: a node by name, or the node a rank runs on. Exactly one is set.
struct Endpoint {
  std::string node;
  std::optional<int> rank;
};

// The process of a compute or contention fault: a rank of the rank table, or a pid. Exactly one
// is set.
struct ProcessRef {
  std::optional<int> rank;
  std::optional<int> pid;
};

inline constexpr int64_t kMinRateBitPerSecond = 1'000;
inline constexpr int64_t kMaxRateBitPerSecond = 100'000'000'000;
inline constexpr int64_t kMinBurstBytes = 2 << 10;
inline constexpr int64_t kMaxBurstBytes = int64_t{64} << 20;
inline constexpr int64_t kDefaultBurstBytes = 32 << 10;
inline constexpr int kMaxWorkers = 1024;
inline constexpr size_t kMaxThreadNameBytes = 15;  // TASK_COMM_LEN - 1.

// A parsed fault. The fields of the other kinds keep their defaults.
struct FaultSpec {
  std::string text;  // The spec as given (surrounding whitespace stripped).
  FaultKind kind = FaultKind::kLink;

  // link
  Endpoint src;
  Endpoint dst;
  bool both = false;
  // nic
  std::string node;
  // link, nic
  int64_t rate_bit_per_second = 0;
  int64_t burst_bytes = 0;  // Given, or the default above.

  // compute, contention
  ProcessRef process;
  double quota_cores = 0;                           // compute, unless slowdown is set
  std::optional<double> slowdown;                   // compute: instead of quota_cores
  absl::Duration period = absl::Milliseconds(100);  // compute
  std::string thread;  // compute: only the threads of this name; "" = the whole process.
  int workers = 1;     // contention

  absl::Duration from = absl::ZeroDuration();  // Since the driver's start.
  std::optional<absl::Duration> until;         // nullopt: until the driver stops.
};

// Parses one spec (grammar above). `cpus` is the machine's CPU count, the bound of a quota.
absl::StatusOr<FaultSpec> ParseFaultSpec(absl::string_view text, int cpus);

// The machine's online CPU count (sysconf), at least 1.
int OnlineCpus();

// "8mbit" style rendering of a rate, exact (e.g. 2500000 -> "2500kbit"); for logs.
std::string RateString(int64_t bit_per_second);

}  // namespace falcon::chaos

#endif  // FALCON_CHAOS_FAULT_SPEC_H_
