// falcon_chaos --cluster cluster.json [--ranks ranks.json] --fault SPEC [--fault SPEC ...]
//              --record truth.json
//   Runs the faults' schedule (from=/until= of each spec, seconds since start) in the
//   foreground; on SIGINT/SIGTERM/SIGHUP, or once every fault has ended, removes everything
//   and exits.
// falcon_chaos clear --cluster cluster.json
//   Removes every chaos qdisc and cgroup left on the cluster (chaos/clear.h). Idempotent.
//
// Exit status: 0 done; 1 a fault could not be applied or removed (what was applied is removed
// first; the record says which); 2 bad flags, specs or files.
// Specs: chaos/fault_spec.h; record format: chaos/record.h.
#include <glog/logging.h>
#include <signal.h>
#include <time.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "chaos/clear.h"
#include "chaos/driver.h"
#include "chaos/fault_spec.h"
#include "chaos/runner.h"
#include "chaos/schedule.h"
#include "cli/help/flags_help.h"
#include "cluster/cluster_spec.h"
#include "common/clock.h"
#include "common/logging/logging.h"

ABSL_FLAG(std::string, cluster, "", "cluster.json of the test cluster (cluster/cluster_spec.h)");
ABSL_FLAG(std::string, ranks, "", "ranks.json, for faults that name ranks (re-read at each apply)");
ABSL_FLAG(std::string, record, "", "where to write the ground truth JSON (chaos/record.h)");
// Repeatable: every --fault is collected before Abseil parses the rest (an Abseil flag keeps only
// its last value, and a list flag would split the specs at their commas). Declared for --help.
ABSL_FLAG(std::string, fault, "",
          "a fault spec (repeat the flag for several; chaos/fault_spec.h has the values' ranges): "
          "link:src=NODE,dst=NODE|src_rank=R,dst_rank=R,rate=R[,burst=B][,both] | "
          "nic:node=NODE,rate=R[,burst=B] | "
          "compute:rank=R|pid=P,quota=CORES|slowdown=F[,period=D][,thread=NAME] | "
          "contention:rank=R|pid=P[,workers=W]; each with [from=S][,until=S]");
ABSL_FLAG(std::string, stress_ng, "stress-ng", "stress-ng program for contention faults");

namespace {

using falcon::chaos::Driver;
using falcon::chaos::FaultSpec;

// Removes --fault SPEC / --fault=SPEC from argv into *faults.
std::vector<char*> TakeFaults(int argc, char** argv, std::vector<std::string>* faults,
                              bool* missing_value) {
  std::vector<char*> rest = {argv[0]};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--") {
      for (; i < argc; ++i) rest.push_back(argv[i]);
      break;
    }
    if (a == "--fault" || a == "-fault") {
      if (i + 1 >= argc) {
        *missing_value = true;
        break;
      }
      faults->push_back(argv[++i]);
    } else if (absl::StartsWith(a, "--fault=") || absl::StartsWith(a, "-fault=")) {
      faults->push_back(a.substr(a.find('=') + 1));
    } else {
      rest.push_back(argv[i]);
    }
  }
  return rest;
}

int Clear(const falcon::cluster::ClusterSpec& cluster) {
  std::unique_ptr<falcon::chaos::Runner> runner = falcon::chaos::NewRealRunner();
  falcon::chaos::ClearReport report = falcon::chaos::ClearCluster(cluster, runner.get());
  for (const std::string& r : report.removed) LOG(INFO) << "chaos leftover removed what=" << r;
  for (const std::string& n : report.notes) LOG(INFO) << "chaos clear note: " << n;
  for (const std::string& e : report.errors) LOG(ERROR) << "chaos clear failed error=" << e;
  std::printf("falcon_chaos clear: %zu removed, %zu errors\n", report.removed.size(),
              report.errors.size());
  return report.errors.empty() ? 0 : 1;
}

int Run(const falcon::cluster::ClusterSpec& cluster, const std::vector<std::string>& texts) {
  if (texts.empty()) {
    std::fprintf(stderr, "falcon_chaos: no --fault given\n");
    return 2;
  }
  if (absl::GetFlag(FLAGS_record).empty()) {
    std::fprintf(stderr, "falcon_chaos: --record is required (the ground truth of the run)\n");
    return 2;
  }
  std::vector<FaultSpec> specs;
  for (const std::string& text : texts) {
    absl::StatusOr<FaultSpec> spec =
        falcon::chaos::ParseFaultSpec(text, falcon::chaos::OnlineCpus());
    if (!spec.ok()) {
      std::fprintf(stderr, "falcon_chaos: --fault: %s\n",
                   std::string(spec.status().message()).c_str());
      return 2;
    }
    specs.push_back(*std::move(spec));
  }
  // SIGINT/SIGTERM/SIGHUP (a closed terminal or SSH session) are taken with sigtimedwait;
  // children (stress-ng) start with an empty mask.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);

  std::unique_ptr<falcon::chaos::Runner> runner = falcon::chaos::NewRealRunner();
  falcon::common::RealClock clock;
  falcon::chaos::DriverOptions options;
  options.rank_table_path = absl::GetFlag(FLAGS_ranks);
  options.record_path = absl::GetFlag(FLAGS_record);
  options.stress_ng = absl::GetFlag(FLAGS_stress_ng);
  absl::StatusOr<std::unique_ptr<Driver>> driver =
      Driver::Create(cluster, options, runner.get(), &clock);
  if (!driver.ok()) {
    std::fprintf(stderr, "falcon_chaos: %s\n", std::string(driver.status().message()).c_str());
    return 2;
  }
  for (const FaultSpec& spec : specs) {
    if (absl::Status s = (*driver)->Check(spec); !s.ok()) {
      std::fprintf(stderr, "falcon_chaos: fault '%s': %s\n", spec.text.c_str(),
                   std::string(s.message()).c_str());
      return 2;
    }
  }
  falcon::chaos::Schedule schedule(specs,
                                   absl::FromUnixMillis((*driver)->record().started_unix_ms));
  int code = 0;
  for (;;) {
    if (absl::Status s = schedule.Step(**driver, clock.Now()); !s.ok()) {
      LOG(ERROR) << "chaos schedule stopped error=" << s.message();
      code = 1;
      break;
    }
    if (schedule.Done()) {
      LOG(INFO) << "chaos schedule done: every fault has ended";
      break;
    }
    const std::optional<absl::Time> next = schedule.Next();
    const absl::Duration wait =
        next.has_value() ? std::max(*next - clock.Now(), absl::Milliseconds(1)) : absl::Hours(24);
    const timespec ts = absl::ToTimespec(wait);
    const int sig = sigtimedwait(&stop, nullptr, &ts);
    if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP) {
      LOG(INFO) << "chaos driver stopping on " << sigabbrev_np(sig);
      break;
    }
  }
  if (absl::Status s = (*driver)->RemoveAll(); !s.ok()) {
    LOG(ERROR) << "chaos faults not all removed error=" << s.message();
    code = 1;
  }
  if (!(*driver)->record_write_status().ok()) code = 1;
  std::printf("falcon_chaos: %zu fault(s) recorded in %s\n", (*driver)->record().faults.size(),
              options.record_path.c_str());
  return code;
}

}  // namespace

constexpr char kUsage[] =
    "falcon_chaos --cluster cluster.json [--ranks ranks.json] --fault SPEC [--fault SPEC ...] "
    "--record truth.json\n  | falcon_chaos clear --cluster cluster.json\n"
    "Kernel-level fail-slows (tc, cgroup CPU quota, stress-ng) on a test cluster; see "
    "docs/operations.md#game-days-the-fault-driver.\n";

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(kUsage);
  if (falcon::cli::help::WantsHelp(argc, argv)) {  // Abseil's own --help exits 1.
    std::fputs(falcon::cli::help::FlagsHelp(kUsage, "chaos_main", /*dashes=*/false).c_str(),
               stdout);
    return 0;
  }
  absl::FlagsUsageConfig usage;  // --help lists this file's flags (by default: none matched).
  usage.contains_help_flags = [](absl::string_view file) {
    return absl::StrContains(file, "chaos_main");
  };
  usage.contains_helpshort_flags = usage.contains_help_flags;
  absl::SetFlagsUsageConfig(usage);
  std::vector<std::string> faults;
  bool missing_value = false;
  std::vector<char*> args = TakeFaults(argc, argv, &faults, &missing_value);
  if (missing_value) {
    std::fprintf(stderr, "falcon_chaos: --fault needs a value\n");
    return 2;
  }
  std::vector<char*> rest = absl::ParseCommandLine(static_cast<int>(args.size()), args.data());
  falcon::common::logging::InitLogging(argv[0]);
  const bool clear = rest.size() == 2 && std::strcmp(rest[1], "clear") == 0;
  if (rest.size() > 1 && !clear) {
    std::fprintf(stderr, "falcon_chaos: unexpected argument '%s' (the only command is 'clear')\n",
                 rest[1]);
    return 2;
  }
  if (absl::GetFlag(FLAGS_cluster).empty()) {
    std::fprintf(stderr, "falcon_chaos: --cluster is required\n");
    return 2;
  }
  absl::StatusOr<falcon::cluster::ClusterSpec> cluster =
      falcon::cluster::ReadClusterSpec(absl::GetFlag(FLAGS_cluster));
  if (!cluster.ok()) {
    std::fprintf(stderr, "falcon_chaos: %s\n", std::string(cluster.status().message()).c_str());
    return 2;
  }
  if (clear) {
    if (!faults.empty()) {
      std::fprintf(stderr, "falcon_chaos: clear takes no --fault\n");
      return 2;
    }
    return Clear(*cluster);
  }
  return Run(*cluster, faults);
}
