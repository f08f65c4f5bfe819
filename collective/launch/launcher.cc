#include "collective/launch/launcher.h"

#include <dirent.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "collective/fault/fault_spec.h"
#include "common/subprocess.h"

extern char** environ;

namespace falcon::collective::launch {
namespace {

void RemoveTree(const std::string& dir) {
  if (DIR* d = opendir(dir.c_str()); d != nullptr) {
    while (dirent* e = readdir(d)) {
      const std::string name = e->d_name;
      if (name == "." || name == "..") continue;
      const std::string path = dir + "/" + name;
      if (e->d_type == DT_DIR) {
        RemoveTree(path);
      } else {
        unlink(path.c_str());
      }
    }
    closedir(d);
  }
  rmdir(dir.c_str());
}

std::vector<int> AllowedCpus() {
  std::vector<int> cpus;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &set)) cpus.push_back(c);
    }
  }
  return cpus;
}

struct Rank {
  std::optional<common::Subprocess> proc;  // Set once started.
  bool running = false;
  std::string node;
};

std::string Describe(int rank, const Rank& r, const common::ExitStatus& status) {
  return absl::StrCat("rank ", rank, " (", r.node, ", pid ", r.proc->pid(), ") ",
                      status.ToString());
}

// The guard: a forked copy of the launcher, in a process group of its own, that outlives it by a
// moment. The launcher tells it through a socket each rank it started (+pid) and reaped (-pid).
// When the socket closes (the launcher ended, SIGKILL included) it SIGKILLs the process group of
// every rank not yet reaped, which reaches what the ranks started themselves (PR_SET_PDEATHSIG
// only reaches the ranks), and exits. Nothing here allocates: `live` holds `max_ranks` slots.
[[noreturn]] void RunGuard(int fd, pid_t* live, int max_ranks) {
  int n = 0;
  char buf[1024];
  size_t have = 0;
  for (;;) {
    const ssize_t got = read(fd, buf + have, sizeof(buf) - have);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    have += static_cast<size_t>(got);
    size_t used = 0;
    for (; have - used >= sizeof(int32_t); used += sizeof(int32_t)) {
      int32_t v;
      memcpy(&v, buf + used, sizeof(v));
      if (v > 0 && n < max_ranks) {
        live[n++] = v;
      } else if (v < 0) {
        for (int i = 0; i < n; ++i) {
          if (live[i] == -v) live[i] = 0;
        }
      }
    }
    memmove(buf, buf + used, have - used);
    have -= used;
  }
  for (int i = 0; i < n; ++i) {
    if (live[i] > 0) kill(-live[i], SIGKILL);
  }
  _exit(0);
}

struct Guard {
  std::optional<common::Subprocess> proc;
  int fd = -1;  // The launcher's end of the socket.

  // +pid: a rank (and process group) started; -pid: reaped. Best effort: without a guard, ranks
  // still die with the launcher through PR_SET_PDEATHSIG.
  void Tell(pid_t rank_pid, bool started) const {
    if (fd < 0) return;
    const int32_t v = started ? rank_pid : -rank_pid;
    (void)!send(fd, &v, sizeof(v), MSG_NOSIGNAL);
  }
  // Closes the socket (the guard kills what is left) and reaps the guard.
  void Stop() {
    if (fd >= 0) close(fd);
    fd = -1;
    if (proc.has_value()) {
      if (absl::StatusOr<common::ExitStatus> s = proc->Wait(); !s.ok()) {
        std::fprintf(stderr, "falcon_launch: %s\n", s.status().ToString().c_str());
      }
    }
    proc.reset();
  }
};

// Forks the guard (see RunGuard): a function child, in a process group of its own so that it is
// not stopped along with the launcher's, without a parent-death signal so that it outlives the
// launcher. Without a guard (socketpair or fork failed, said on stderr) the launch goes on.
Guard StartGuard(std::vector<pid_t>& live) {
  Guard g;
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
    std::fprintf(stderr, "falcon_launch: no guard process (socketpair: %s)\n", strerror(errno));
    return g;
  }
  common::SpawnOptions options;
  options.name = "falcon_launch guard";
  options.new_process_group = true;
  absl::StatusOr<common::Subprocess> proc =
      common::Subprocess::SpawnFunction(options, [&]() -> int {
        close(fds[0]);
        RunGuard(fds[1], live.data(), static_cast<int>(live.size()));
      });
  close(fds[1]);
  if (!proc.ok()) {
    close(fds[0]);
    std::fprintf(stderr, "falcon_launch: no guard process (%s)\n",
                 proc.status().ToString().c_str());
    return g;
  }
  g.proc = std::move(*proc);
  g.fd = fds[0];
  return g;
}

// kInvalidArgument naming --faults, the fault (canonical syntax) and the rank when a fault of
// `spec` names a global rank outside [0, nproc); the parser's error when `spec` does not parse.
absl::Status ValidateFaultRanks(const std::string& spec, int nproc) {
  absl::StatusOr<fault::FaultPlan> plan = fault::LoadFaultSpec(spec);
  if (!plan.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--faults: ", plan.status().message()));
  }
  auto check = [nproc](int rank, const fault::FaultPlan& one) -> absl::Status {
    if (rank >= 0 && rank < nproc) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat("--faults: fault '", one.ToString(),
                                                   "' names rank ", rank, ", but --nproc=", nproc,
                                                   " has ranks 0..", nproc - 1));
  };
  for (const fault::ComputeFault& f : plan->compute) {
    fault::FaultPlan one;
    one.compute = {f};
    if (auto s = check(f.rank, one); !s.ok()) return s;
  }
  for (const fault::LinkFault& f : plan->links) {
    fault::FaultPlan one;
    one.links = {f};
    if (auto s = check(f.src, one); !s.ok()) return s;
    if (auto s = check(f.dst, one); !s.ok()) return s;
  }
  for (const fault::ContentionFault& f : plan->contention) {
    fault::FaultPlan one;
    one.contention = {f};
    if (auto s = check(f.rank, one); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace

namespace {

// The node of rank `r`: rank_nodes[r], or node{r / (nproc / nodes)} filling nodes in order.
std::string RankNode(const LaunchOptions& o, int r) {
  if (!o.rank_nodes.empty()) return o.rank_nodes[r];
  return absl::StrCat("node", r / (o.nproc / o.nodes));
}

}  // namespace

absl::Status ValidateLaunchOptions(const LaunchOptions& o) {
  constexpr absl::Duration kMaxDuration = absl::Minutes(10);  // --grace_ms, --comm_timeout_ms.
  if (o.nproc <= 0)
    return absl::InvalidArgumentError(absl::StrCat("--nproc must be > 0, got ", o.nproc));
  if (o.pp < 1) return absl::InvalidArgumentError(absl::StrCat("--pp must be >= 1, got ", o.pp));
  if (o.tp < 1) return absl::InvalidArgumentError(absl::StrCat("--tp must be >= 1, got ", o.tp));
  if (o.dp < 0) return absl::InvalidArgumentError(absl::StrCat("--dp must be >= 1, got ", o.dp));
  constexpr int kMaxRanks = 4096;  // one machine's emulated job; also keeps products in range
  if (o.nproc > kMaxRanks || o.pp > kMaxRanks || o.tp > kMaxRanks || o.dp > kMaxRanks) {
    return absl::InvalidArgumentError(
        absl::StrCat("--nproc, --dp, --pp and --tp must each be <= ", kMaxRanks,
                     "; got --nproc=", o.nproc, " --dp=", o.dp, " --pp=", o.pp, " --tp=", o.tp));
  }
  const int64_t pp_tp = int64_t{o.pp} * o.tp;
  const int64_t dp = o.dp == 0 ? o.nproc / pp_tp : o.dp;
  if (dp < 1 || dp * pp_tp != o.nproc) {
    return absl::InvalidArgumentError(absl::StrCat("--dp x --pp x --tp = ", dp, " x ", o.pp, " x ",
                                                   o.tp, " must equal --nproc=", o.nproc));
  }
  if (o.rank_nodes.empty() && (o.nodes < 1 || o.nproc % o.nodes != 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--nodes=", o.nodes, " must be >= 1 and divide --nproc=", o.nproc));
  }
  if (!o.rank_nodes.empty()) {
    if (static_cast<int>(o.rank_nodes.size()) != o.nproc) {
      return absl::InvalidArgumentError(absl::StrCat("rank nodes: ", o.rank_nodes.size(),
                                                     " names for --nproc=", o.nproc, " ranks"));
    }
    const std::set<std::string> distinct(o.rank_nodes.begin(), o.rank_nodes.end());
    if (static_cast<int>(distinct.size()) != o.nodes) {
      return absl::InvalidArgumentError(
          absl::StrCat("rank nodes: ", distinct.size(), " distinct nodes, but --nodes=", o.nodes));
    }
  }
  if (o.cluster.has_value()) {
    for (int r = 0; r < o.nproc; ++r) {
      const std::string node = RankNode(o, r);
      if (!o.cluster->Node(node).ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("rank ", r, " belongs on node '", node, "', which the cluster (",
                         o.cluster->nodes.size(), " nodes, ",
                         cluster::ClusterKindName(o.cluster->kind), ") does not have"));
      }
    }
  }
  if (o.backend != "gloo" && o.backend != "nccl") {
    return absl::InvalidArgumentError(
        absl::StrCat("--backend='", o.backend, "': want gloo or nccl"));
  }
  if (o.comm_timeout <= absl::ZeroDuration() || o.comm_timeout > kMaxDuration) {
    return absl::InvalidArgumentError(
        absl::StrCat("--comm_timeout_ms must be in (0, ", absl::ToInt64Milliseconds(kMaxDuration),
                     "], got ", absl::FormatDuration(o.comm_timeout)));
  }
  if (o.grace < absl::ZeroDuration() || o.grace > kMaxDuration) {
    return absl::InvalidArgumentError(absl::StrCat("--grace_ms must be in [0, ",
                                                   absl::ToInt64Milliseconds(kMaxDuration),
                                                   "], got ", absl::FormatDuration(o.grace)));
  }
  if (!o.faults.empty()) {
    if (auto s = ValidateFaultRanks(o.faults, o.nproc); !s.ok()) return s;
  }
  if (o.command.empty() || o.command[0].empty()) {
    return absl::InvalidArgumentError("no program given: falcon_launch [flags] -- PROGRAM ARGS...");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<RankEnv>> PlanRanks(const LaunchOptions& o,
                                               const std::string& rendezvous_dir) {
  if (auto s = ValidateLaunchOptions(o); !s.ok()) return s;
  std::vector<RankEnv> out(o.nproc);
  std::map<std::string, int> node_index, node_size;
  for (int r = 0; r < o.nproc; ++r) {
    const std::string node = RankNode(o, r);
    node_index.emplace(node, static_cast<int>(node_index.size()));
    ++node_size[node];
  }
  std::map<std::string, int> placed;
  for (int r = 0; r < o.nproc; ++r) {
    RankEnv& e = out[r];
    e.rank = r;
    e.world_size = o.nproc;
    e.node = RankNode(o, r);
    e.local_rank = placed[e.node]++;
    e.local_world_size = node_size[e.node];
    e.node_index = node_index[e.node];
    e.num_nodes = o.nodes;
    if (o.cluster.has_value()) e.host_address = (*o.cluster->Node(e.node))->address;
    e.rendezvous_dir = rendezvous_dir;
    e.dp = o.dp == 0 ? o.nproc / (o.pp * o.tp) : o.dp;
    e.pp = o.pp;
    e.tp = o.tp;
    e.faults = o.faults;
    e.backend = o.backend;
    e.comm_timeout = o.comm_timeout;
  }
  return out;
}

absl::StatusOr<LaunchResult> RunLaunch(const LaunchOptions& o) {
  if (auto s = ValidateLaunchOptions(o); !s.ok()) return s;
  std::string root = o.rendezvous_root;
  if (root.empty()) {
    const char* tmp = getenv("TMPDIR");
    root = tmp != nullptr && *tmp != '\0' ? tmp : "/tmp";
  }
  std::string dir = absl::StrCat(root, "/falcon-rdzv.XXXXXX");
  if (mkdtemp(dir.data()) == nullptr) {
    return absl::InternalError(
        absl::StrCat("cannot create a rendezvous dir under '", root, "': ", strerror(errno)));
  }
  auto plan = PlanRanks(o, dir);
  if (!plan.ok()) return plan.status();

  // Signals arrive through a signalfd; children get the original mask back before exec.
  sigset_t mask, old_mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGINT);
  sigaddset(&mask, SIGTERM);
  sigaddset(&mask, SIGCHLD);
  sigprocmask(SIG_BLOCK, &mask, &old_mask);
  const int sfd = signalfd(-1, &mask, SFD_CLOEXEC);
  if (sfd < 0) {
    sigprocmask(SIG_SETMASK, &old_mask, nullptr);
    return absl::InternalError(absl::StrCat("signalfd: ", strerror(errno)));
  }

  // Ranks get the caller's environment without FALCON_* plus their own; Spawn unblocks the
  // signals blocked above in each rank before exec.
  std::vector<std::string> base_env;
  for (char** e = environ; *e != nullptr; ++e) {
    if (strncmp(*e, "FALCON_", 7) != 0) base_env.emplace_back(*e);
  }
  const std::vector<int> cpus = AllowedCpus();
  std::vector<pid_t> guard_slots(o.nproc);
  Guard guard = StartGuard(guard_slots);

  std::vector<Rank> ranks(o.nproc);
  LaunchResult result;
  int running = 0;
  bool stopping = false;
  absl::Time kill_at = absl::InfiniteFuture();
  auto stop_all = [&](int sig) {
    for (Rank& r : ranks) {
      if (!r.running) continue;
      if (absl::Status s = r.proc->SignalGroup(sig); !s.ok()) {
        std::fprintf(stderr, "falcon_launch: %s\n", s.ToString().c_str());
      }
    }
  };

  for (int r = 0; r < o.nproc; ++r) {
    common::SpawnOptions spawn;
    spawn.argv = o.command;
    if (o.cluster.has_value()) {
      spawn.argv = cluster::CommandInNode(**o.cluster->Node((*plan)[r].node), o.command);
    }
    spawn.env = base_env;
    for (const auto& [k, v] : (*plan)[r].ToVariables()) {
      spawn.env->push_back(absl::StrCat(k, "=", v));
    }
    spawn.search_path = true;
    spawn.name = absl::StrCat("rank ", r, " (", (*plan)[r].node, ")");
    spawn.new_process_group = true;
    spawn.parent_death_signal = SIGKILL;
    if (o.pin_cpus && !cpus.empty()) spawn.cpus = {cpus[r % cpus.size()]};
    absl::StatusOr<common::Subprocess> proc = common::Subprocess::Spawn(spawn);
    if (!proc.ok()) {
      // The rank fails to start (the program cannot be executed, or fork failed): a failing rank
      // with the shell's code 127; the ranks already started are stopped as for any failure.
      stopping = true;
      result.failed_rank = r;
      result.exit_code = 127;
      result.summary = absl::StrCat(spawn.name, ": ", proc.status().message());
      std::fprintf(stderr, "falcon_launch: %s; stopping %d other ranks\n", result.summary.c_str(),
                   running);
      stop_all(SIGTERM);
      kill_at = absl::Now() + o.grace;
      break;
    }
    guard.Tell(proc->pid(), /*started=*/true);
    ranks[r].proc = std::move(*proc);
    ranks[r].running = true;
    ranks[r].node = (*plan)[r].node;
    ++running;
  }
  if (!stopping) {
    std::fprintf(
        stderr, "falcon_launch: started %d ranks on %d nodes (dp=%d pp=%d tp=%d), store %s%s\n",
        o.nproc, o.nodes, (*plan)[0].dp, o.pp, o.tp, dir.c_str(),
        o.cluster.has_value()
            ? absl::StrCat(", ", cluster::ClusterKindName(o.cluster->kind), " cluster").c_str()
            : "");
    if (!o.rank_table_path.empty()) {
      cluster::RankTable table;
      table.generation = o.generation;
      for (int r = 0; r < o.nproc; ++r) {
        table.ranks.push_back({r, ranks[r].node, ranks[r].proc->pid()});
      }
      // The job runs on without it; tools that need it report the missing table themselves.
      if (absl::Status s = cluster::WriteRankTable(o.rank_table_path, table); !s.ok()) {
        std::fprintf(stderr, "falcon_launch: rank table not written: %s\n",
                     std::string(s.message()).c_str());
      }
    }
  }

  while (running > 0) {
    int timeout_ms = -1;
    if (kill_at != absl::InfiniteFuture()) {
      timeout_ms =
          static_cast<int>(std::max<int64_t>(0, absl::ToInt64Milliseconds(kill_at - absl::Now())));
    }
    pollfd pfd{sfd, POLLIN, 0};
    const int ready = poll(&pfd, 1, timeout_ms);
    if (ready > 0) {
      signalfd_siginfo info;
      if (read(sfd, &info, sizeof(info)) == sizeof(info) &&
          (info.ssi_signo == SIGINT || info.ssi_signo == SIGTERM)) {
        const int sig = static_cast<int>(info.ssi_signo);
        std::fprintf(stderr, "falcon_launch: got %s, forwarding to %d ranks\n", strsignal(sig),
                     running);
        stop_all(sig);
        if (!stopping) {
          stopping = true;
          result.exit_code = 128 + sig;
          result.summary = absl::StrCat("stopped by ", strsignal(sig));
          kill_at = absl::Now() + o.grace;
        }
      }
    }
    // Reap whoever ended (SIGCHLD may coalesce, so always sweep).
    for (int r = 0; r < o.nproc; ++r) {
      Rank& rk = ranks[r];
      if (!rk.running) continue;
      absl::StatusOr<std::optional<common::ExitStatus>> ended = rk.proc->Poll();
      if (!ended.ok()) {
        // Not ours to wait for any more (reaped elsewhere): counted as ended, status unknown.
        std::fprintf(stderr, "falcon_launch: %s\n", ended.status().ToString().c_str());
        ended = std::optional<common::ExitStatus>(common::ExitStatus::Exited(127));
      }
      if (!ended->has_value()) continue;
      const common::ExitStatus status = **ended;
      rk.running = false;
      --running;
      // Anything the rank left in its group.
      if (absl::Status s = rk.proc->SignalGroup(SIGKILL); !s.ok()) {
        std::fprintf(stderr, "falcon_launch: %s\n", s.ToString().c_str());
      }
      guard.Tell(rk.proc->pid(), /*started=*/false);
      if (!status.success() && !stopping) {
        stopping = true;
        result.failed_rank = r;
        result.exit_code = status.ShellCode();
        result.summary = Describe(r, rk, status);
        std::fprintf(stderr, "falcon_launch: %s; stopping %d other ranks\n", result.summary.c_str(),
                     running);
        stop_all(SIGTERM);
        kill_at = absl::Now() + o.grace;
      }
    }
    if (running > 0 && absl::Now() >= kill_at) {
      std::fprintf(stderr, "falcon_launch: %d ranks still running after %s, killing them\n",
                   running, absl::FormatDuration(o.grace).c_str());
      stop_all(SIGKILL);
      kill_at = absl::InfiniteFuture();
    }
  }
  guard.Stop();
  close(sfd);
  sigprocmask(SIG_SETMASK, &old_mask, nullptr);
  if (!o.keep_rendezvous) RemoveTree(dir);
  if (result.summary.empty()) result.summary = absl::StrCat("all ", o.nproc, " ranks exited 0");
  std::fprintf(stderr, "falcon_launch: %s (exit %d)\n", result.summary.c_str(), result.exit_code);
  return result;
}

}  // namespace falcon::collective::launch
