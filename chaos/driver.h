// The fault driver: applies kernel-level fail-slows (fault_spec.h) to a test cluster from outside
// the job, and keeps the ground truth of what it did (record.h). Used by falcon_chaos (game days),
// the demo and the end-to-end tests.
//
//   auto driver = Driver::Create(cluster, {.rank_table_path = "ranks.json",
//                                          .record_path = "truth.json"}, runner, &clock);
//   auto id = (*driver)->Apply(*ParseFaultSpec("compute:rank=5,quota=0.3", OnlineCpus()), 120);
//   ...
//   (*driver)->Remove(*id, 410);
//
// What it touches: only the interfaces of the cluster's nodes (a node's `iface` in its `netns`,
// and its `host_veth` in the root namespace), processes of the rank table (or given by pid), the
// cgroups it creates and the stress-ng processes it starts (tc.h, cgroup.h). Apply applies at
// once; from/until of a spec are the caller's schedule (schedule.h runs them for falcon_chaos).
//
// Target resolution at Apply: nodes by name from the cluster spec; ranks through the rank table,
// read again at every Apply (the launcher rewrites it when it restarts the job). A compute fault
// with slowdown=F first measures the process's CPU use over DriverOptions::slowdown_window (Apply
// takes that long) and caps it at that use / F; when that cap is below the kernel's smallest
// quota (1 ms per period) the fault is refused (kFailedPrecondition). With thread=NAME the
// process's threads of that name are looked up at Apply (kNotFound naming the process and the
// threads it has when none is), only they are measured and throttled; on cgroup v2
// kFailedPrecondition (cgroup.h).
//
// Composition of shaping faults (one root qdisc per interface):
//   - link faults from one sender share one htb on its interface (a class + filter each); one
//     directed pair (sender interface, receiver address) carries at most one link fault;
//   - a nic fault owns the root qdisc (tbf) of the node's interface and host-side veth;
//   - a link fault and a nic fault that need the same interface (a link *from* a node whose NIC is
//     degraded, or the reverse) are refused, naming the fault already there: tbf and htb do not
//     stack on one root, and a link cap under a NIC cap would test neither. A link *to* a node
//     whose NIC is degraded composes (different interfaces; the smaller cap wins).
//   - a process carries at most one compute fault; contention faults stack. Contention's
//     stress-ng runs at the process's niceness (through `nice -n DELTA` when the driver's own
//     differs), so that it competes on equal terms whatever the driver runs at.
//
// Errors (absl::Status, the message starting "fault ID (SPEC): "): kInvalidArgument for a spec
// the cluster cannot take (unknown node, a link or nic fault on a loopback cluster, two ranks on
// one node: "ranks 3 and 5 are both on node1: their traffic never leaves the node"); kNotFound
// for an unknown rank, a missing rank table or process; kFailedPrecondition for a conflict with a
// fault already applied, a failing tc (with its stderr) or cgroup write; the runner's error when a
// program cannot start. A failed Apply leaves nothing applied and is recorded with its error.
//
// Removal never fails for what is already gone: a process that ended, an interface or namespace
// that no longer exists, a qdisc or cgroup that `falcon_chaos clear` removed; the record's note
// says so.
//
// Every apply and remove logs one line (glog INFO): "fault applied fault=ID kind=KIND
// target=TARGET did=WHAT" / "fault removed ...".
//
// Thread-compatible: one thread at a time. Stress-ng dies with the thread that applied its fault
// (PR_SET_PDEATHSIG): apply from a thread that outlives the fault.
#ifndef FALCON_CHAOS_DRIVER_H_
#define FALCON_CHAOS_DRIVER_H_

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "chaos/cgroup.h"
#include "chaos/fault_spec.h"
#include "chaos/record.h"
#include "chaos/runner.h"
#include "chaos/tc.h"
#include "cluster/cluster_spec.h"
#include "common/clock.h"

namespace falcon::chaos {

struct DriverOptions {
  std::string rank_table_path;  // ranks.json; "" refuses faults that name ranks.
  std::string record_path;      // The ground truth file; "" keeps it in memory only.
  std::string stress_ng = "stress-ng";
  std::string sys_fs_cgroup = "/sys/fs/cgroup";  // Where the cgroup hierarchies are mounted.
  pid_t driver_pid = 0;                          // In cgroup names; 0: getpid().
  // compute:slowdown=F measures the process's (or its named threads') CPU use over this window
  // before it applies.
  absl::Duration slowdown_window = absl::Seconds(1);
  int64_t clock_ticks_per_second = 0;  // Of /proc/PID/stat times; 0: sysconf(_SC_CLK_TCK).
};

class Driver {
 public:
  // `runner` and `clock` must outlive the driver. Removes chaos cgroups left by drivers that
  // died (their pid is gone), whatever their cluster.
  static absl::StatusOr<std::unique_ptr<Driver>> Create(cluster::ClusterSpec cluster,
                                                        DriverOptions options, Runner* runner,
                                                        const common::Clock* clock);
  // Removes every fault still applied (RemoveAll), logging errors.
  ~Driver();
  Driver(const Driver&) = delete;
  Driver& operator=(const Driver&) = delete;

  // Checks what can be checked before applying: the nodes a spec names exist, link and nic faults
  // are on a netns cluster, a rank table is given when the spec names ranks. Errors as Apply.
  absl::Status Check(const FaultSpec& spec) const;

  // Applies `spec` now; its id (1, 2, ...). `iteration`: the job's iteration, for the record.
  absl::StatusOr<int> Apply(const FaultSpec& spec, std::optional<int64_t> iteration = {});
  // Removes fault `id`; OK when it is no longer applied (removed, or never applied).
  // kNotFound for an id never given out.
  absl::Status Remove(int id, std::optional<int64_t> iteration = {});
  // Removes every applied fault (newest first); the first error, after trying them all.
  absl::Status RemoveAll(std::optional<int64_t> iteration = {});

  // Ids of the faults applied now, ascending.
  std::vector<int> applied() const;
  const Record& record() const { return record_; }
  // The last failure to write the record file (OK when every write succeeded).
  const absl::Status& record_write_status() const { return record_write_status_; }

 private:
  // One link cap: an htb class on an interface.
  struct LinkCap {
    Interface iface;
    int slot = 0;
    std::string dst_address;
  };
  struct Applied {
    FaultSpec spec;
    std::string target;                // For log lines: "node0->node1", "node2", "rank=5 pid=42".
    std::string did;                   // For the apply log line.
    std::vector<LinkCap> caps;         // link
    std::vector<Interface> tbf_roots;  // nic
    std::optional<Throttle> throttle;  // compute
    int pid = 0;                       // compute, contention
    std::unique_ptr<BackgroundProcess> stress;  // contention
  };
  // Who holds an interface's root qdisc.
  struct InterfaceUse {
    int tbf_fault = 0;              // nic fault id, or 0.
    std::map<int, int> link_slots;  // slot -> link fault id.
  };

  Driver(cluster::ClusterSpec cluster, DriverOptions options, Runner* runner,
         const common::Clock* clock);

  absl::Status ApplyLink(int id, const FaultSpec& spec, FaultRecord* rec, Applied* a);
  absl::Status ApplyNic(int id, const FaultSpec& spec, FaultRecord* rec, Applied* a);
  absl::Status ApplyCompute(int id, const FaultSpec& spec, FaultRecord* rec, Applied* a);
  absl::Status ApplyContention(int id, const FaultSpec& spec, FaultRecord* rec, Applied* a);
  // Undoes `a`; what was unusual goes to *notes, what failed to *errors.
  void Undo(int id, Applied& a, std::vector<std::string>* notes, std::vector<std::string>* errors);
  // Undo after a failed Apply; errors are logged (the Apply's own error is what is returned).
  void Rollback(int id, Applied* a);

  // The node of a link endpoint (by name or through the rank table).
  absl::StatusOr<const cluster::NodeSpec*> EndpointNode(const Endpoint& e,
                                                        const cluster::RankTable* ranks) const;
  absl::StatusOr<cluster::RankTable> ReadRanks() const;
  // The pid of a compute or contention fault (through the rank table for a rank), filling the
  // record's rank, node, pid and generation; kNotFound when the process does not exist.
  absl::StatusOr<int> ResolveProcess(const ProcessRef& p, Target* target);
  absl::Status CgroupsReady();
  // The niceness in a /proc/PID/stat file (field 19).
  absl::StatusOr<int> Niceness(const std::string& stat_path);
  // The cores `pid` uses (utime + stime over options_.slowdown_window); with `tids`, the cores
  // those threads use (proc_threads.h: ThreadCpuNanos), threads that end meanwhile left out.
  absl::StatusOr<double> MeasureCores(int pid, const std::vector<int>& tids);
  std::string FaultName(int id, const FaultSpec& spec) const;
  FaultRecord* MutableRecord(int id);
  void WriteRecord();

  cluster::ClusterSpec cluster_;
  DriverOptions options_;
  Runner* runner_;
  const common::Clock* clock_;
  Tc tc_;
  std::optional<Cgroups> cgroups_;  // Detected at the first compute fault (or at Create).
  Record record_;
  int next_id_ = 1;
  std::map<int, Applied> applied_;
  std::map<Interface, InterfaceUse> interfaces_;
  absl::Status record_write_status_;
};

}  // namespace falcon::chaos

#endif  // FALCON_CHAOS_DRIVER_H_
