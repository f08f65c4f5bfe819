// The fault driver's ground truth: what was applied to which target and removed when. Written
// (atomically, whole) after every change; the demo report and the benchmarks score Falcon's
// verdicts against it.
//
// Format (one JSON object; times are Unix milliseconds, null while unknown):
//   {"driver_pid": 4242, "cluster_kind": "netns", "cluster_prefix": "fn3a7f",
//    "started_unix_ms": 1700000000000,
//    "faults": [
//      {"id": 1, "spec": "link:src=node0,dst=node1,rate=8mbit", "kind": "link",
//       "from_s": 0, "until_s": 30,                       (until_s null: until the driver stops)
//       "target": {...},                                  (per kind, below)
//       "applied_unix_ms": 1700000000012, "applied_iteration": 120,
//       "removed_unix_ms": 1700000030020, "removed_iteration": 410,
//       "error": "",                                      (why applying or removing failed)
//       "note": ""},                                      (e.g. "process 42 had exited")
//      ...]}
//   Iterations are those the caller gave to Apply/Remove (null when none, as from falcon_chaos).
//   A fault that failed to apply has applied_unix_ms null and its error; its target holds what
//   was resolved before the failure.
// Targets:
//   link: {"src_node", "dst_node", "src_rank", "dst_rank" (null when named by node), "both",
//          "rate_bit_per_second", "burst_bytes",
//          "shaped": [{"node", "netns", "iface", "dst_node", "dst_address", "class"}, ...]}
//          (one entry per capped direction: src -> dst, and dst -> src with `both`)
//   nic:  {"node", "address", "rate_bit_per_second", "burst_bytes",
//          "shaped": [{"node", "netns", "iface", "qdisc"}: the node's interface (egress), and its
//          host-side veth (netns "", traffic into the node)]}
//   compute: {"rank" (null for pid=), "node", "pid", "rank_generation" (null for pid=),
//          "cgroup_version" (1|2), "cgroup" (absolute path), "origin_cgroup" (relative; with
//          thread=, the first thread's), "thread" (NAME of thread=NAME, else null), "tids" (the
//          TIDs of the threads moved into the cgroup at apply, ascending; [] for the whole
//          process),
//          "slowdown" (F of slowdown=F, else null), "measured_cores" (the CPU use the quota was
//          derived from for slowdown=F, else null), "quota_cores", "period_us", "quota_us"}
//   contention: {"rank", "node", "pid", "rank_generation", "cpus" (a CPU list, "0-1,4"),
//          "workers", "nice" (the process's niceness, stress-ng's too), "stress_pid"}
//
// ParseRecord reads the format back: kInvalidArgument naming the source and the field.
#ifndef FALCON_CHAOS_RECORD_H_
#define FALCON_CHAOS_RECORD_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "chaos/fault_spec.h"

namespace falcon::chaos {

// One interface a shaping fault changed.
struct ShapedInterface {
  std::string node;
  std::string netns;  // "" for a host-side veth (root namespace).
  std::string iface;
  std::string dst_node;     // link: the capped direction's receiver.
  std::string dst_address;  // link: the filter's address.
  std::string handle;       // link: the htb class ("fa1c:3"); nic: the qdisc ("fa1c:").
};

// What a fault resolved to; which fields matter depends on the kind (see the format above).
struct Target {
  // link
  std::string src_node;
  std::string dst_node;
  std::optional<int> src_rank;
  std::optional<int> dst_rank;
  bool both = false;
  // nic
  std::string address;
  // link, nic
  int64_t rate_bit_per_second = 0;
  int64_t burst_bytes = 0;
  std::vector<ShapedInterface> shaped;
  // nic, compute, contention
  std::string node;
  // compute, contention
  std::optional<int> rank;
  int pid = 0;
  std::optional<int64_t> rank_generation;
  // compute
  int cgroup_version = 0;
  std::string cgroup;
  std::string origin_cgroup;
  std::string thread;     // "" for the whole process (null in the file).
  std::vector<int> tids;  // With thread: the threads moved.
  std::optional<double> slowdown;
  std::optional<double> measured_cores;
  double quota_cores = 0;
  int64_t period_us = 0;
  int64_t quota_us = 0;
  // contention
  std::string cpus;
  int workers = 0;
  int nice = 0;
  int stress_pid = 0;
};

struct FaultRecord {
  int id = 0;
  std::string spec;
  FaultKind kind = FaultKind::kLink;
  double from_s = 0;
  std::optional<double> until_s;
  Target target;
  std::optional<int64_t> applied_unix_ms;
  std::optional<int64_t> applied_iteration;
  std::optional<int64_t> removed_unix_ms;
  std::optional<int64_t> removed_iteration;
  std::string error;
  std::string note;
};

struct Record {
  int driver_pid = 0;
  std::string cluster_kind;
  std::string cluster_prefix;
  int64_t started_unix_ms = 0;
  std::vector<FaultRecord> faults;  // By id.

  // The fault with `id`; nullptr when none.
  const FaultRecord* Fault(int id) const;
};

std::string RecordToJson(const Record& record);  // Indented, with a trailing newline.
absl::StatusOr<Record> ParseRecord(absl::string_view json, absl::string_view source);

}  // namespace falcon::chaos

#endif  // FALCON_CHAOS_RECORD_H_
