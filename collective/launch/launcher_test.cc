// Launcher planning and validation, and falcon_launch end to end: environment of every rank,
// a failing rank stops the others with its exit code, a crashed rank gives 128+signal, SIGTERM
// is forwarded, a SIGKILLed launcher takes its ranks and their children along, and real Gloo
// ranks pass the op checks under the launcher (4 ranks, 2 nodes).
#include "collective/launch/launcher.h"

#include <errno.h>
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "cluster/cluster_spec.h"
#include "common/subprocess.h"
#include "gtest/gtest.h"

namespace falcon::collective::launch {
namespace {

std::string Runfile(const std::string& path) {
  return absl::StrCat(std::getenv("TEST_SRCDIR"), "/falcon/", path);
}

std::string TempDir(const std::string& tag) {
  std::string dir = absl::StrCat(std::getenv("TEST_TMPDIR"), "/", tag, ".XXXXXX");
  EXPECT_NE(mkdtemp(dir.data()), nullptr);
  return dir;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

bool Exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

struct LaunchRun {
  int exit_code = -1;
  std::string output;  // stdout + stderr.
};

// Runs falcon_launch with `args`; `on_start(launcher)` runs right after it started.
LaunchRun Launch(std::vector<std::string> args, const std::string& outdir,
                 const std::function<void(common::Subprocess&)>& on_start = nullptr) {
  args.insert(args.begin(), Runfile("collective/falcon_launch"));
  args.insert(args.begin() + 1, absl::StrCat("--rendezvous_root=", outdir));
  args.insert(args.begin() + 2, "--grace_ms=2000");
  const std::string log = outdir + "/launch.log";
  common::SpawnOptions options;
  options.argv = args;
  options.stdout_stream = common::Stdio::File(log);
  options.stderr_stream = common::Stdio::SameAsStdout();
  LaunchRun run;
  absl::StatusOr<common::Subprocess> launcher = common::Subprocess::Spawn(options);
  if (!launcher.ok()) {
    run.output = launcher.status().ToString();
    return run;
  }
  if (on_start) on_start(*launcher);
  absl::StatusOr<std::optional<common::ExitStatus>> ended = launcher->WaitFor(absl::Seconds(60));
  if (ended.ok() && !ended->has_value()) {
    run.output = "TIMED OUT\n";
    absl::StatusOr<common::ExitStatus> killed = launcher->Stop(SIGKILL, absl::ZeroDuration());
    ended =
        killed.ok() ? absl::StatusOr<std::optional<common::ExitStatus>>(*killed) : killed.status();
  }
  if (!ended.ok()) {
    run.output += ended.status().ToString() + "\n";
  } else {
    run.exit_code = (*ended)->ShellCode();
  }
  run.output += ReadFile(log);
  return run;
}

TEST(LauncherTest, PlansNodesLocalRanksAndSizes) {
  LaunchOptions o;
  o.nproc = 8;
  o.dp = 2;
  o.pp = 2;
  o.tp = 2;
  o.nodes = 2;
  o.faults = "link:src=1,dst=2,delay_ms=1";
  o.command = {"prog"};
  auto plan = PlanRanks(o, "/store");
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->size(), 8u);
  EXPECT_EQ((*plan)[0].node, "node0");
  EXPECT_EQ((*plan)[3].node, "node0");
  EXPECT_EQ((*plan)[4].node, "node1");
  EXPECT_EQ((*plan)[5].local_rank, 1);
  EXPECT_EQ((*plan)[5].local_world_size, 4);
  EXPECT_EQ((*plan)[7].node_index, 1);
  for (const RankEnv& e : *plan) {
    EXPECT_EQ(e.rendezvous_dir, "/store");
    EXPECT_EQ(e.world_size, 8);
    EXPECT_EQ(e.faults, o.faults);
  }
  o.dp = 0;  // Derived.
  EXPECT_EQ(PlanRanks(o, "/s").value()[0].dp, 2);
}

TEST(LauncherTest, ExplicitRankNodesAndClusterAddresses) {
  LaunchOptions o;
  o.nproc = 4;
  o.pp = 2;
  o.nodes = 3;
  o.rank_nodes = {"node0", "node2", "node2", "node3"};  // An S4 restart without node1.
  o.command = {"prog"};
  auto plan = PlanRanks(o, "/s");
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ((*plan)[1].node, "node2");
  EXPECT_EQ((*plan)[2].local_rank, 1);
  EXPECT_EQ((*plan)[2].local_world_size, 2);
  EXPECT_EQ((*plan)[3].node_index, 2);
  EXPECT_EQ((*plan)[3].host_address, "127.0.0.1");

  cluster::ClusterSpec spec;
  spec.kind = cluster::ClusterKind::kNetns;
  spec.controller_address = "10.9.9.254";
  for (int n = 0; n < 4; ++n) {
    spec.nodes.push_back({absl::StrCat("node", n), absl::StrCat("ns", n),
                          absl::StrCat("10.9.9.", n + 1), "eth0", absl::StrCat("h", n)});
  }
  o.cluster = spec;
  plan = PlanRanks(o, "/s");
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ((*plan)[0].host_address, "10.9.9.1");
  EXPECT_EQ((*plan)[2].host_address, "10.9.9.3");
  EXPECT_EQ((*plan)[3].host_address, "10.9.9.4");

  spec.nodes.pop_back();
  o.cluster = spec;
  EXPECT_EQ(PlanRanks(o, "/s").status().message(),
            "rank 3 belongs on node 'node3', which the cluster (3 nodes, netns) does not have");
  o.cluster.reset();
  o.rank_nodes.pop_back();
  EXPECT_EQ(PlanRanks(o, "/s").status().message(), "rank nodes: 3 names for --nproc=4 ranks");
  o.rank_nodes = {"node0", "node0", "node2", "node2"};
  EXPECT_EQ(PlanRanks(o, "/s").status().message(), "rank nodes: 2 distinct nodes, but --nodes=3");
}

TEST(LauncherTest, WritesTheRankTableOnceEveryRankRuns) {
  const std::string out = TempDir("table");
  const std::string spec_path = out + "/cluster.json";
  ASSERT_TRUE(
      cluster::WriteClusterSpec(
          spec_path,
          [] {
            cluster::ClusterSpec s;
            s.controller_address = "127.0.0.1";
            s.nodes = {{"node0", "", "127.0.0.1", "", ""}, {"node1", "", "127.0.0.1", "", ""}};
            return s;
          }())
          .ok());
  LaunchRun run = Launch(
      {"--nproc=4", "--nodes=2", "--cluster=" + spec_path, "--rank_table=" + out + "/ranks.json",
       "--", Runfile("collective/launch/launch_test_child"), "env", out},
      out);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  auto table = cluster::ReadRankTable(out + "/ranks.json");
  ASSERT_TRUE(table.ok()) << table.status();
  ASSERT_EQ(table->ranks.size(), 4u);
  EXPECT_EQ(table->generation, 0);
  EXPECT_EQ(table->ranks[3].node, "node1");
  for (const cluster::RankEntry& r : table->ranks) EXPECT_GT(r.pid, 0);
  EXPECT_NE(table->ranks[0].pid, table->ranks[1].pid);
}

TEST(LauncherTest, ValidationNamesTheFlag) {
  LaunchOptions good;
  good.nproc = 4;
  good.dp = 2;
  good.pp = 2;
  good.nodes = 2;
  good.command = {"prog"};
  ASSERT_TRUE(ValidateLaunchOptions(good).ok());
  struct Case {
    std::function<void(LaunchOptions&)> edit;
    const char* flag;
  } cases[] = {
      {[](LaunchOptions& o) { o.nproc = 0; }, "--nproc"},
      {[](LaunchOptions& o) { o.dp = 3; }, "--dp"},
      {[](LaunchOptions& o) { o.nodes = 3; }, "--nodes"},
      {[](LaunchOptions& o) { o.tp = 0; }, "--tp"},
      {[](LaunchOptions& o) { o.backend = "mpi"; }, "--backend"},
      {[](LaunchOptions& o) { o.command.clear(); }, "PROGRAM"},
      // Durations are bounded (10 minutes) and not negative.
      {[](LaunchOptions& o) { o.grace = absl::Milliseconds(600001); }, "--grace_ms"},
      {[](LaunchOptions& o) { o.grace = absl::Milliseconds(2147483647); }, "--grace_ms"},
      {[](LaunchOptions& o) { o.grace = absl::Milliseconds(-1); }, "--grace_ms"},
      {[](LaunchOptions& o) { o.comm_timeout = absl::Milliseconds(600001); }, "--comm_timeout_ms"},
      {[](LaunchOptions& o) { o.comm_timeout = absl::InfiniteDuration(); }, "--comm_timeout_ms"},
      // pp x tp overflowing int once divided by zero (SIGFPE) or wrapped to nproc.
      {[](LaunchOptions& o) {
         o.pp = 65536;
         o.tp = 65536;
       },
       "--tp"},
      {[](LaunchOptions& o) {
         o.dp = 2;
         o.pp = 2;
         o.tp = 1073741825;
       },
       "--tp"},
  };
  for (absl::Duration d : {absl::ZeroDuration(), absl::Milliseconds(600000)}) {
    LaunchOptions o = good;
    o.grace = d;
    EXPECT_TRUE(ValidateLaunchOptions(o).ok()) << d;
  }
  for (const Case& c : cases) {
    LaunchOptions o = good;
    c.edit(o);
    absl::Status s = ValidateLaunchOptions(o);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.flag;
    EXPECT_TRUE(absl::StrContains(s.message(), c.flag)) << s;
  }
}

TEST(LauncherTest, FaultsNamingRanksOutsideTheJobAreRejected) {
  LaunchOptions o;
  o.nproc = 8;
  o.nodes = 2;
  o.command = {"prog"};
  o.faults = "compute:rank=7,factor=1.5; link:src=0,dst=7,delay_ms=5; contention:rank=3";
  ASSERT_TRUE(ValidateLaunchOptions(o).ok()) << ValidateLaunchOptions(o);
  struct Case {
    const char* faults;
    const char* want;  // The fault and the rank, as the message must name them.
  } cases[] = {
      {"compute:rank=9,factor=1.5", "compute:rank=9"},
      {"compute:rank=8,factor=2", "rank 8"},
      {"link:src=8,dst=1,delay_ms=5", "link:src=8,dst=1"},
      {"link:src=1,dst=12,bw_mbps=100", "rank 12"},
      {"compute:rank=0,factor=2; contention:rank=9,workers=1", "contention:rank=9"},
      {"link:src=0,dst=1,delay_ms=1\ncompute:rank=100,factor=2", "rank 100"},
      {"compute:rank=x", "--faults"},  // Unparsable specs are rejected before any rank starts.
  };
  for (const Case& c : cases) {
    o.faults = c.faults;
    absl::Status s = ValidateLaunchOptions(o);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.faults;
    EXPECT_TRUE(absl::StrContains(s.message(), c.want)) << c.faults << ": " << s;
    EXPECT_TRUE(absl::StrContains(s.message(), "--faults")) << s;
    EXPECT_FALSE(PlanRanks(o, "/s").ok()) << c.faults;
  }
  // falcon_launch exits 2 and starts nothing.
  const std::string out = TempDir("badfault");
  LaunchRun run = Launch({"--nproc=8", "--faults=compute:rank=9,factor=1.5", "--",
                          Runfile("collective/launch/launch_test_child"), "env", out},
                         out);
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_TRUE(absl::StrContains(run.output, "rank 9")) << run.output;
  EXPECT_FALSE(Exists(out + "/rank0.env")) << run.output;
}

TEST(LauncherTest, EveryRankGetsItsEnvironment) {
  const std::string out = TempDir("env");
  LaunchRun run =
      Launch({"--nproc=4", "--dp=2", "--pp=2", "--nodes=2", "--faults=compute:rank=1,factor=2",
              "--", Runfile("collective/launch/launch_test_child"), "env", out},
             out);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  std::string store;
  for (int r = 0; r < 4; ++r) {
    const std::string env = ReadFile(absl::StrCat(out, "/rank", r, ".env"));
    EXPECT_TRUE(absl::StrContains(env, absl::StrCat("FALCON_RANK=", r, "\n"))) << env;
    EXPECT_TRUE(absl::StrContains(env, "FALCON_WORLD_SIZE=4\n"));
    EXPECT_TRUE(absl::StrContains(env, absl::StrCat("FALCON_LOCAL_RANK=", r % 2, "\n")));
    EXPECT_TRUE(absl::StrContains(env, absl::StrCat("FALCON_NODE=node", r / 2, "\n")));
    EXPECT_TRUE(absl::StrContains(env, "FALCON_DP=2\nFALCON_PP=2\nFALCON_TP=1\n"));
    EXPECT_TRUE(absl::StrContains(env, "FALCON_FAULTS=compute:rank=1,factor=2\n"));
    const size_t at = env.find("FALCON_RENDEZVOUS=");
    const std::string mine = env.substr(at, env.find('\n', at) - at);
    if (r == 0) store = mine;
    EXPECT_EQ(mine, store) << "all ranks share one store";
    EXPECT_TRUE(absl::StrContains(mine, out + "/falcon-rdzv."));
  }
  EXPECT_FALSE(Exists(store.substr(strlen("FALCON_RENDEZVOUS=")))) << "store dir removed";
}

TEST(LauncherTest, FailingRankStopsTheOthersAndGivesItsExitCode) {
  const std::string out = TempDir("fail");
  LaunchRun run = Launch({"--nproc=4", "--nodes=2", "--",
                          Runfile("collective/launch/launch_test_child"), "fail", "2", "3", out},
                         out);
  EXPECT_EQ(run.exit_code, 3) << run.output;
  EXPECT_TRUE(absl::StrContains(run.output, "rank 2 (node1, pid")) << run.output;
  EXPECT_TRUE(absl::StrContains(run.output, "exited with code 3")) << run.output;
  for (int r : {0, 1, 3}) {
    EXPECT_TRUE(Exists(absl::StrCat(out, "/term", r))) << "rank " << r << " not stopped\n"
                                                       << run.output;
  }
}

TEST(LauncherTest, CrashedRankGives128PlusSignal) {
  const std::string out = TempDir("crash");
  LaunchRun run = Launch(
      {"--nproc=2", "--", Runfile("collective/launch/launch_test_child"), "crash", "1", out}, out);
  EXPECT_EQ(run.exit_code, 128 + SIGKILL) << run.output;
  EXPECT_TRUE(absl::StrContains(run.output, "rank 1 (node0, pid")) << run.output;
  EXPECT_TRUE(absl::StrContains(run.output, "killed by signal 9")) << run.output;
  EXPECT_TRUE(Exists(out + "/term0")) << run.output;
}

TEST(LauncherTest, ForwardsSigtermToEveryRank) {
  const std::string out = TempDir("sigterm");
  LaunchRun run = Launch(
      {"--nproc=3", "--", Runfile("collective/launch/launch_test_child"), "wait", out}, out,
      [&](common::Subprocess& launcher) {
        // Wait until every rank is up, then stop the job.
        for (int i = 0; i < 3000; ++i) {
          if (Exists(out + "/ready0") && Exists(out + "/ready1") && Exists(out + "/ready2")) {
            break;
          }
          absl::SleepFor(absl::Milliseconds(10));
        }
        ASSERT_TRUE(launcher.Signal(SIGTERM).ok());
      });
  EXPECT_EQ(run.exit_code, 128 + SIGTERM) << run.output;
  for (int r = 0; r < 3; ++r) EXPECT_TRUE(Exists(absl::StrCat(out, "/term", r))) << run.output;
}

// Pids of every rank and of the child each rank started (launch_test_child tree), once all
// `nproc` ranks wrote them (empty after 30 s).
std::vector<pid_t> TreePids(const std::string& out, int nproc) {
  std::vector<pid_t> pids;
  for (int i = 0; i < 3000 && static_cast<int>(pids.size()) < 2 * nproc; ++i) {
    pids.clear();
    for (int r = 0; r < nproc; ++r) {
      std::istringstream in(ReadFile(absl::StrCat(out, "/pids", r)));
      pid_t rank_pid = 0, child_pid = 0;
      if (in >> rank_pid >> child_pid) pids.insert(pids.end(), {rank_pid, child_pid});
    }
    if (static_cast<int>(pids.size()) < 2 * nproc) absl::SleepFor(absl::Milliseconds(10));
  }
  return static_cast<int>(pids.size()) == 2 * nproc ? pids : std::vector<pid_t>{};
}

// A process is gone when it no longer exists or is a zombie waiting for its (new) parent.
bool Gone(pid_t pid) {
  if (kill(pid, 0) != 0) return errno == ESRCH;
  const std::string stat = ReadFile(absl::StrCat("/proc/", pid, "/stat"));
  const size_t paren = stat.rfind(')');
  return paren != std::string::npos && stat.size() > paren + 2 && stat[paren + 2] == 'Z';
}

// Waits up to 10 s for all of `pids` to be gone; SIGKILLs and returns the ones left.
std::vector<pid_t> Survivors(const std::vector<pid_t>& pids) {
  std::vector<pid_t> left = pids;
  for (int i = 0; i < 1000 && !left.empty(); ++i) {
    std::vector<pid_t> still;
    for (pid_t p : left) {
      if (!Gone(p)) still.push_back(p);
    }
    left = still;
    if (!left.empty()) absl::SleepFor(absl::Milliseconds(10));
  }
  for (pid_t p : left) kill(p, SIGKILL);  // Leave nothing running.
  return left;
}

TEST(LauncherTest, RanksAndTheirChildrenDieWithAKilledLauncher) {
  const std::string out = TempDir("sigkill");
  std::vector<pid_t> pids;
  LaunchRun run = Launch(
      {"--nproc=3", "--nodes=3", "--", Runfile("collective/launch/launch_test_child"), "tree", out},
      out, [&](common::Subprocess& launcher) {
        pids = TreePids(out, 3);
        ASSERT_TRUE(launcher.Signal(SIGKILL).ok());
      });
  EXPECT_EQ(run.exit_code, 128 + SIGKILL) << run.output;
  ASSERT_EQ(pids.size(), 6u) << run.output;
  EXPECT_EQ(Survivors(pids), std::vector<pid_t>{})
      << "outlived a SIGKILLed launcher; (rank, its child) pids: " << absl::StrJoin(pids, " ")
      << "\n"
      << run.output;
}

TEST(LauncherTest, SigtermStopsRanksAndTheirChildren) {
  const std::string out = TempDir("tree_sigterm");
  std::vector<pid_t> pids;
  LaunchRun run =
      Launch({"--nproc=2", "--", Runfile("collective/launch/launch_test_child"), "tree", out}, out,
             [&](common::Subprocess& launcher) {
               pids = TreePids(out, 2);
               ASSERT_TRUE(launcher.Signal(SIGTERM).ok());
             });
  EXPECT_EQ(run.exit_code, 128 + SIGTERM) << run.output;
  ASSERT_EQ(pids.size(), 4u) << run.output;
  EXPECT_EQ(Survivors(pids), std::vector<pid_t>{}) << run.output;
}

TEST(LauncherTest, MissingProgramFailsClearly) {
  const std::string out = TempDir("missing");
  LaunchRun run = Launch({"--nproc=2", "--", "/no/such/program"}, out);
  EXPECT_EQ(run.exit_code, 127) << run.output;
  // The failing rank names itself, the program and why exec failed (the other rank may be
  // stopped before it gets to say so).
  const std::string missing = ": cannot execute '/no/such/program': No such file or directory";
  EXPECT_TRUE(absl::StrContains(run.output, "rank 0 (node0)" + missing) ||
              absl::StrContains(run.output, "rank 1 (node0)" + missing))
      << run.output;
  LaunchRun not_exec = Launch({"--nproc=1", "--", out}, out);  // A directory.
  EXPECT_EQ(not_exec.exit_code, 127) << not_exec.output;
  EXPECT_TRUE(absl::StrContains(not_exec.output, absl::StrCat("rank 0 (node0): cannot execute '",
                                                              out, "': Permission denied")))
      << not_exec.output;
  LaunchRun long_grace = Launch({"--nproc=1", "--grace_ms=2147483647", "--", "/bin/true"}, out);
  EXPECT_EQ(long_grace.exit_code, 2) << long_grace.output;
  EXPECT_TRUE(absl::StrContains(long_grace.output, "--grace_ms")) << long_grace.output;
  LaunchRun bad = Launch({"--nproc=3", "--dp=2", "--", "/bin/true"}, out);
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_TRUE(absl::StrContains(bad.output, "--dp")) << bad.output;
}

TEST(LauncherTest, GlooRanksPassOpChecksUnderTheLauncher) {
  const std::string out = TempDir("ops");
  LaunchRun run = Launch({"--nproc=4", "--dp=2", "--pp=2", "--nodes=2", "--comm_timeout_ms=20000",
                          "--", Runfile("collective/testing/collective_op_check"), "--quick"},
                         out);
  EXPECT_EQ(run.exit_code, 0) << run.output;
  for (int r = 0; r < 4; ++r) {
    EXPECT_TRUE(absl::StrContains(
        run.output, absl::StrCat("rank ", r, "/4 (node", r / 2, ", gloo): all ops and splits OK")))
        << run.output;
  }
}

TEST(LauncherTest, SilentlyDeadGlooRankIsReportedByItsPeers) {
  const std::string out = TempDir("die");
  LaunchRun run = Launch({"--nproc=3", "--comm_timeout_ms=20000", "--",
                          Runfile("collective/testing/collective_op_check"), "--die_rank=2"},
                         out);
  EXPECT_EQ(run.exit_code, 0) << run.output;
  for (int r : {0, 1}) {
    EXPECT_TRUE(absl::StrContains(run.output, absl::StrCat("rank ", r, ": dead peer detected")))
        << run.output;
  }
}

}  // namespace
}  // namespace falcon::collective::launch
