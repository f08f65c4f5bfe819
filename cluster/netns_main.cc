// falcon_netns: make and remove network-namespace clusters by hand (operators, benchmarks, game
// days). See cluster/README.md.
//   falcon_netns create [--nodes N] [--spec_out PATH] [--detach]
//       prints the cluster spec (one JSON line) on stdout, writes it to --spec_out, and stays up
//       until SIGINT/SIGTERM/SIGHUP, then removes the cluster (and the --spec_out file); with
//       --detach it leaves the cluster in place and exits (remove it with `destroy`).
//   falcon_netns destroy --spec PATH   removes a detached cluster.
//   falcon_netns cleanup               removes leftovers of killed creators, lists what it kept.
//   falcon_netns check                 says whether this process can create namespaces here.
// Exit status: 0 ok, 1 the operation failed (the message says why), 2 bad flags or usage.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "cli/help/flags_help.h"
#include "cluster/netns.h"
#include "cluster/netns_names.h"
#include "common/flag_checks.h"
#include "common/logging/logging.h"

ABSL_FLAG(int, nodes, 4, "create: number of nodes (node0 .. node{N-1}), 1 to 253");
ABSL_FLAG(std::string, spec_out, "", "create: write the cluster spec (cluster.json) here");
ABSL_FLAG(bool, detach, false, "create: leave the cluster in place and exit (needs --spec_out)");
ABSL_FLAG(std::string, spec, "", "destroy: the cluster spec written by create --detach");
ABSL_FLAG(std::string, lock_dir, falcon::cluster::kDefaultNetnsLockDir,
          "lock files of every creator on this machine (keep the default)");

namespace {

constexpr char kUsage[] =
    "falcon_netns: network-namespace clusters for Falcon (needs root with CAP_NET_ADMIN).\n"
    "  falcon_netns create [--nodes N] [--spec_out PATH] [--detach]\n"
    "  falcon_netns destroy --spec PATH\n"
    "  falcon_netns cleanup\n"
    "  falcon_netns check\n"
    "Exit status: 0 ok, 1 failed, 2 bad flags or usage.\n";

int Usage(const std::string& error) {
  std::fprintf(stderr, "falcon_netns: %s\n%s", error.c_str(), kUsage);
  return 2;
}

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "falcon_netns: %s\n", std::string(s.message()).c_str());
  return 1;
}

// Abseil exits 1 on an unknown flag or a bad value; this tool promises 2. Checks each flag before
// the first "--" against the registry and parses its value into a throwaway check.
std::string CheckFlags(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    absl::string_view arg = argv[i];
    if (arg == "--") break;
    if (arg.size() < 2 || arg[0] != '-') continue;
    absl::ConsumePrefix(&arg, "-");
    absl::ConsumePrefix(&arg, "-");
    const size_t eq = arg.find('=');
    const absl::string_view name = arg.substr(0, eq);
    absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    if (flag == nullptr && absl::StartsWith(name, "no")) {
      absl::CommandLineFlag* negated = absl::FindCommandLineFlag(name.substr(2));
      if (negated != nullptr && negated->IsOfType<bool>() && eq == absl::string_view::npos) {
        continue;
      }
    }
    if (flag == nullptr) return absl::StrCat("unknown flag --", name);
    if (eq == absl::string_view::npos && flag->IsOfType<bool>()) continue;
    std::string value;
    if (eq != absl::string_view::npos) {
      value = std::string(arg.substr(eq + 1));
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      return absl::StrCat("--", name, ": missing value");
    }
    std::string error;
    if (!flag->ParseFrom(value, &error)) return absl::StrCat("--", name, ": ", error);
  }
  return "";
}

int Create(const std::string& lock_dir) {
  const int nodes = absl::GetFlag(FLAGS_nodes);
  const std::string spec_out = absl::GetFlag(FLAGS_spec_out);
  const bool detach = absl::GetFlag(FLAGS_detach);
  if (absl::Status s =
          falcon::common::CheckIntegerIn(nodes, "--nodes", 1, falcon::cluster::kMaxNetnsNodes);
      !s.ok()) {
    return Usage(std::string(s.message()));
  }
  if (detach && spec_out.empty()) return Usage("--detach needs --spec_out (for destroy --spec)");
  if (!spec_out.empty()) {
    if (absl::Status s = falcon::common::CheckPath(spec_out, "--spec_out"); !s.ok()) {
      return Usage(std::string(s.message()));
    }
  }
  // Blocked before any thread exists (the self-check makes some): sigwait() below takes them.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGHUP);
  if (!detach) sigprocmask(SIG_BLOCK, &stop, nullptr);

  falcon::cluster::NetnsOptions o;
  o.nodes = falcon::cluster::DefaultNodeNames(nodes);
  o.lock_dir = lock_dir;
  const absl::Time start = absl::Now();
  absl::StatusOr<std::unique_ptr<falcon::cluster::NetnsCluster>> cluster =
      falcon::cluster::NetnsCluster::Create(o);
  if (!cluster.ok()) return Fail(cluster.status());
  const absl::Duration took = absl::Now() - start;
  if (!spec_out.empty()) {
    if (absl::Status s = (*cluster)->WriteSpec(spec_out); !s.ok()) return Fail(s);
  }
  std::printf("%s\n", falcon::cluster::ClusterSpecToJson((*cluster)->spec()).c_str());
  std::fflush(stdout);
  std::fprintf(stderr, "falcon_netns: created %d nodes in %s (prefix %s, subnet %s)\n", nodes,
               absl::FormatDuration(took).c_str(), (*cluster)->spec().prefix.c_str(),
               (*cluster)->spec().subnet.c_str());
  if (detach) {
    if (absl::Status s = (*cluster)->Detach(); !s.ok()) return Fail(s);
    std::fprintf(stderr, "falcon_netns: detached; remove it with: falcon_netns destroy --spec %s\n",
                 spec_out.c_str());
    return 0;
  }
  int sig = 0;
  while (sigwait(&stop, &sig) != 0) {
  }
  const absl::Time teardown = absl::Now();
  absl::Status destroyed = (*cluster)->Destroy();
  std::fprintf(stderr, "falcon_netns: signal %d: destroyed in %s\n", sig,
               absl::FormatDuration(absl::Now() - teardown).c_str());
  if (!spec_out.empty()) unlink(spec_out.c_str());
  return destroyed.ok() ? 0 : Fail(destroyed);
}

int Destroy(const std::string& lock_dir) {
  const std::string path = absl::GetFlag(FLAGS_spec);
  if (path.empty()) return Usage("destroy needs --spec PATH");
  absl::StatusOr<falcon::cluster::ClusterSpec> spec = falcon::cluster::ReadClusterSpec(path);
  if (!spec.ok()) return Fail(spec.status());
  const absl::Time start = absl::Now();
  if (absl::Status s = falcon::cluster::DestroyNetnsCluster(*spec, nullptr, lock_dir); !s.ok()) {
    return Fail(s);
  }
  std::fprintf(stderr, "falcon_netns: destroyed %s (%zu nodes) in %s\n", spec->prefix.c_str(),
               spec->nodes.size(), absl::FormatDuration(absl::Now() - start).c_str());
  return 0;
}

int Cleanup(const std::string& lock_dir) {
  absl::StatusOr<falcon::cluster::NetnsCleanupReport> report =
      falcon::cluster::CleanupStaleNetns(nullptr, lock_dir);
  if (!report.ok()) return Fail(report.status());
  for (const std::string& r : report->removed) std::printf("removed %s\n", r.c_str());
  for (const std::string& k : report->kept) std::printf("kept %s\n", k.c_str());
  if (report->errors > 0) {
    std::fprintf(stderr, "falcon_netns: %d removals failed (see the log above)\n", report->errors);
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(kUsage);
  if (falcon::cli::help::WantsHelp(argc, argv)) {
    std::fputs(
        falcon::cli::help::FlagsHelp(absl::StrCat(kUsage, falcon::common::logging::kLoggingUsage),
                                     "netns_main.cc", /*dashes=*/false)
            .c_str(),
        stdout);
    return 0;
  }
  if (std::string error = CheckFlags(argc, argv); !error.empty()) return Usage(error);
  const std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  falcon::common::logging::InitLogging(argv[0]);
  if (args.size() != 2) {
    return Usage(args.size() < 2 ? "missing subcommand"
                                 : absl::StrCat("unexpected argument '", args[2], "'"));
  }
  const std::string command = args[1];
  const std::string lock_dir = absl::GetFlag(FLAGS_lock_dir);
  if (lock_dir.empty()) return Usage("--lock_dir: empty");
  if (command == "create") return Create(lock_dir);
  if (command == "destroy") return Destroy(lock_dir);
  if (command == "cleanup") return Cleanup(lock_dir);
  if (command == "check") {
    absl::Status s = falcon::cluster::CheckNetnsSupport(nullptr, lock_dir);
    if (!s.ok()) return Fail(s);
    std::printf("network namespaces can be created here\n");
    return 0;
  }
  return Usage(absl::StrCat("unknown subcommand '", command, "'"));
}
