// CPU quotas for compute faults: a process (all its threads) moved into a fresh cgroup whose CPU
// bandwidth is capped, and moved back to where it came from on removal.
//
// Hierarchies (DetectCgroupHierarchy):
//   v2  where /sys/fs/cgroup/cgroup.controllers exists: root /sys/fs/cgroup, the cap written as
//       cpu.max "QUOTA_US PERIOD_US"; the root's cgroup.subtree_control must enable cpu (systemd
//       does; the driver never changes it).
//   v1  else where /sys/fs/cgroup/cpu/cpu.cfs_quota_us exists: root /sys/fs/cgroup/cpu, the cap
//       written as cpu.cfs_period_us then cpu.cfs_quota_us.
// The fault's cgroup is ROOT/falcon-chaos.TAG.DRIVER_PID.FAULT_ID (TAG: the cluster's prefix, or
// "loopback"), a child of the hierarchy's root whatever the process's own cgroup (v2 forbids
// children of a cgroup that holds processes). While throttled, a limit of the process's own
// cgroup does not apply to it: only the fault's quota does.
// The process joins through cgroup.procs (all its threads; children it starts later follow).
// Its origin is its line of /proc/PID/cgroup (v1: the line whose controllers include cpu; v2: the
// "0::" line). Release moves every process in the fault's cgroup (the rank and children it
// started meanwhile) back to the origin, then removes the directory. A process that ended
// meanwhile is no error: Release says so in its note.
// Threads only (Apply with `tids`; cgroup v1): each thread joins through the cgroup's `tasks`
// file, one TID per write; its origin is its line of /proc/PID/task/TID/cgroup. Threads they
// start meanwhile are in the fault's cgroup too. Release moves every TID in `tasks` back: a
// thread to its own origin, one started meanwhile to the first thread's origin. Threads or the
// process that ended meanwhile are no error (the note says so). Cgroup v2 refuses threads
// (kFailedPrecondition): a single thread can only be capped in a threaded subtree (cgroup.type
// "threaded"), and the fault's cgroup would have to sit under the process's own cgroup turned
// into a threaded domain, which changes how every other process there is managed; the driver
// does not do that to a cgroup it did not create.
//
// `falcon_chaos clear` (RemoveChaosCgroups) moves what it finds to the root through
// cgroup.procs: for a left-over thread fault on v1 that moves the thread's whole process.
//
// Errors: the runner's file errors (kNotFound, kPermissionDenied, ... naming the path), with the
// step ("cgroup for pid 42: write /sys/fs/cgroup/cpu/falcon-chaos.x.1.2/cpu.cfs_quota_us:
// Invalid argument"); kFailedPrecondition when no cpu controller is mounted or enabled, or the
// process's origin cgroup is not under the root (another cgroup namespace). A failed Throttle
// leaves nothing behind (process moved back, directory removed).
#ifndef FALCON_CHAOS_CGROUP_H_
#define FALCON_CHAOS_CGROUP_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "chaos/runner.h"

namespace falcon::chaos {

enum class CgroupVersion { kV1, kV2 };

struct CgroupHierarchy {
  CgroupVersion version = CgroupVersion::kV1;
  std::string root;  // Where the hierarchy with the cpu controller is mounted.
};

// Finds the cpu controller under `sys_fs_cgroup` (normally /sys/fs/cgroup) as above.
absl::StatusOr<CgroupHierarchy> DetectCgroupHierarchy(Runner* runner,
                                                      const std::string& sys_fs_cgroup);

// The name of a fault's cgroup, and its parts.
struct ChaosCgroupName {
  std::string tag;
  int driver_pid = 0;
  int fault_id = 0;
};
inline constexpr char kChaosCgroupPrefix[] = "falcon-chaos.";
// The TAG of a cluster prefix: its [A-Za-z0-9_-] characters, others as '_'; "loopback" when empty.
std::string ChaosCgroupTag(absl::string_view cluster_prefix);
std::string FormatChaosCgroupName(const ChaosCgroupName& name);
std::optional<ChaosCgroupName> ParseChaosCgroupName(absl::string_view name);

// A thread moved into a fault's cgroup, and its cgroup before (relative to the root).
struct ThreadOrigin {
  int tid = 0;
  std::string origin;
};

// What a compute fault did.
struct Throttle {
  std::string cgroup;  // Absolute path of the fault's cgroup.
  // The process's cgroup before, relative to the root ("/", "/user.slice"); with threads, the
  // first thread's.
  std::string origin;
  int64_t period_us = 0;
  int64_t quota_us = 0;
  std::vector<ThreadOrigin> threads;  // The threads moved (by TID); empty: the whole process.
};

class Cgroups {
 public:
  Cgroups(Runner* runner, CgroupHierarchy hierarchy)
      : runner_(runner), hierarchy_(std::move(hierarchy)) {}

  const CgroupHierarchy& hierarchy() const { return hierarchy_; }

  // The cgroup of `pid` (of its thread `tid`) in this hierarchy, relative to the root.
  absl::StatusOr<std::string> CgroupOf(int pid);
  absl::StatusOr<std::string> CgroupOfThread(int pid, int tid);

  // OK when threads of `pid` can be throttled alone: cgroup v1. kFailedPrecondition on v2.
  absl::Status CheckThreadsSupported(int pid) const;

  // Creates ROOT/`name` capped at `cores` (quota_us = cores x period, at least 1000) and moves
  // `pid` into it; with `tids`, only those threads of `pid` (v1 only, see above). A thread that
  // ended before its write is left out; kNotFound when every one has.
  absl::StatusOr<Throttle> Apply(int pid, const std::string& name, double cores,
                                 absl::Duration period, const std::vector<int>& tids = {});
  // Moves the processes (or threads) of the fault's cgroup back to their origin and removes it.
  // The note says what was unusual ("process 42 had exited", "threads 44, 45 had ended"), ""
  // otherwise.
  absl::StatusOr<std::string> Release(int pid, const Throttle& throttle);

  // Removes every chaos cgroup (by name) for which `select` holds: its processes move to the
  // root cgroup (their origin is unknown), then the directory goes. The paths removed.
  absl::StatusOr<std::vector<std::string>> RemoveChaosCgroups(
      const std::function<bool(const ChaosCgroupName&)>& select);

 private:
  // Moves every pid listed in `from`/cgroup.procs to `to`/cgroup.procs; pids that ended are
  // skipped (counted in *gone).
  absl::Status MoveAll(const std::string& from, const std::string& to, int* gone);
  // Release of a thread throttle: every TID in its `tasks` back to its origin.
  absl::Status MoveThreadsBack(int pid, const Throttle& throttle, std::vector<std::string>* notes);
  // The cgroup in this hierarchy of a /proc/.../cgroup file; `what` names it in errors.
  absl::StatusOr<std::string> CgroupIn(const std::string& proc_cgroup, const std::string& what);
  std::string Dir(const std::string& relative) const;

  Runner* runner_;
  CgroupHierarchy hierarchy_;
};

}  // namespace falcon::chaos

#endif  // FALCON_CHAOS_CGROUP_H_
