// soak_bench: bounded state under job churn. Starts the real falcon_controller (RocksDB in a
// temporary directory, gRPC on loopback), registers and ends --jobs one-rank jobs through one
// agent's streams (each hello lists the next --jobs_per_hello jobs; the jobs of the hello before,
// no longer listed, end a --job_end_grace of 1 s later), then waits until the retention sweep has
// purged them all (falcon_controller_retention_purged_total{kind="job"}) and ListJobs is empty.
// Prints the controller's resident memory (VmRSS): cold (idle, agent connected); at the start,
// after a warm-up round of --warmup_jobs through the same paths (so that what the first use of a
// code path costs once - code pages, the allocator's and RocksDB's first buffers - is in the start
// figure and not counted as state); at its peak; after the purge; and the ratios. Exits 1 when
// after / start is above --max_ratio or a phase runs past --time_limit. The controller runs with
// the allocator settings of its systemd unit (--glibc_tunables). Loopback only; bounded in time.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/proc_stats.h"
#include "common/subprocess.h"
#include "common/testing/http_get.h"
#include "controller/testing/loopback_agent.h"
#include "proto/falcon/v1/control.grpc.pb.h"
#include "tests/harness/local_cluster.h"

ABSL_FLAG(int, jobs, 100000, "jobs registered and ended");
ABSL_FLAG(int, jobs_per_hello, 250,
          "jobs per agent hello (at most the controller's default "
          "--max_jobs_per_agent, 256)");
ABSL_FLAG(absl::Duration, retention, absl::Seconds(30),
          "the controller's --retention: longer than registering every job takes, so the peak "
          "holds them all");
ABSL_FLAG(int, warmup_jobs, 1000, "jobs of the warm-up round before the start figure (0: none)");
ABSL_FLAG(double, max_ratio, 1.10, "largest accepted RSS after purge / RSS at start");
ABSL_FLAG(std::string, glibc_tunables, "glibc.malloc.tcache_count=0",
          "GLIBC_TUNABLES of the controller: those deploy/systemd/falcon-controller.service sets");
ABSL_FLAG(absl::Duration, time_limit, absl::Minutes(8), "bound on the whole run");

extern char** environ;

namespace falcon::controller {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

double MiB(int64_t bytes) { return static_cast<double>(bytes) / (1 << 20); }

double Scrape(int port, const std::string& series) {
  return common::testing::ScrapeValue(port, series).value_or(-1);
}

falcon::v1::JobRegistration OneRankJob(int i) {
  falcon::v1::JobRegistration reg;
  reg.set_job(absl::StrCat("soak-", i));
  reg.set_world_size(1);
  reg.set_epoch(1);
  falcon::v1::RankInfo* r = reg.add_ranks();
  r->set_rank(0);
  r->set_node("soak-node");
  r->set_gpu(-1);
  r->set_pid(4242);
  r->set_dp_index(-1);
  r->set_pp_index(-1);
  r->set_tp_index(-1);
  return reg;
}

int Fail(const std::string& why) {
  std::fprintf(stderr, "soak_bench: %s\n", why.c_str());
  return 1;
}

int Run() {
  const int total = absl::GetFlag(FLAGS_jobs);
  const int per_hello = absl::GetFlag(FLAGS_jobs_per_hello);
  const absl::Duration retention = absl::GetFlag(FLAGS_retention);
  const absl::Time deadline = absl::Now() + absl::GetFlag(FLAGS_time_limit);
  if (total < 1 || per_hello < 1 || per_hello > 256) {
    return Fail("--jobs must be >= 1 and --jobs_per_hello in [1, 256]");
  }
  absl::StatusOr<std::string> binary = tests::harness::FindRunfile("controller/falcon_controller");
  if (!binary.ok()) return Fail(std::string(binary.status().message()));
  char tmpl[] = "/tmp/falcon_soak_XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return Fail("cannot create a temporary directory");
  const std::string dir = tmpl;
  struct Cleanup {
    std::string dir;
    ~Cleanup() { std::filesystem::remove_all(dir); }
  } cleanup{dir};

  common::SpawnOptions spawn;
  spawn.argv = {*binary, "--listen=127.0.0.1:0", "--plaintext", "--metrics_listen=127.0.0.1:0",
                absl::StrCat("--data_dir=", dir, "/data"), "--tick=50ms",
                // A job ends once its agent has been away from it this long (the hello after
                // its own does not list it).
                "--job_end_grace=1s",
                absl::StrCat("--retention=", absl::FormatDuration(retention))};
  // The allocator settings deploy/systemd/falcon-controller.service gives the controller.
  spawn.env.emplace();
  for (char** e = environ; *e != nullptr; ++e) {
    if (!absl::StartsWith(*e, "GLIBC_TUNABLES=")) spawn.env->push_back(*e);
  }
  spawn.env->push_back(absl::StrCat("GLIBC_TUNABLES=", absl::GetFlag(FLAGS_glibc_tunables)));
  spawn.stdout_stream = common::Stdio::File(dir + "/controller.out");
  spawn.stderr_stream = common::Stdio::File(dir + "/controller.log");
  spawn.parent_death_signal = SIGKILL;
  absl::StatusOr<common::Subprocess> controller = common::Subprocess::Spawn(spawn);
  if (!controller.ok()) return Fail(std::string(controller.status().message()));
  std::string address;
  int metrics_port = 0;
  while (address.empty() || metrics_port == 0) {
    if (absl::Now() > deadline) return Fail("the controller did not start");
    std::stringstream out(ReadFile(dir + "/controller.out"));
    std::string line;
    while (std::getline(out, line)) {
      if (absl::StartsWith(line, "listening on ")) address = line.substr(13);
      if (absl::StartsWith(line, "metrics on ")) {
        const size_t colon = line.rfind(':');
        if (!absl::SimpleAtoi(line.substr(colon + 1), &metrics_port)) metrics_port = 0;
      }
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  const int pid = controller->pid();

  // Peak RSS, sampled every 50 ms.
  std::atomic<int64_t> peak{0};
  std::atomic<bool> sampling{true};
  std::thread sampler([&] {
    while (sampling) {
      const int64_t rss = common::ResidentBytes(pid).value_or(0);
      int64_t seen = peak.load();
      while (rss > seen && !peak.compare_exchange_weak(seen, rss)) {
      }
      absl::SleepFor(absl::Milliseconds(50));
    }
  });
  struct StopSampler {
    std::atomic<bool>* sampling;
    std::thread* thread;
    ~StopSampler() {
      *sampling = false;
      thread->join();
    }
  } stop_sampler{&sampling, &sampler};

  auto connect = [&](std::vector<falcon::v1::JobRegistration> jobs) {
    auto agent = std::make_unique<testing::LoopbackAgent>(
        "soak-agent", "soak-node", std::vector<uint32_t>{0}, std::move(jobs));
    absl::Status s = agent->Connect(address, absl::Seconds(60));
    return s.ok() ? std::move(agent) : nullptr;
  };
  std::unique_ptr<testing::LoopbackAgent> agent = connect({});
  if (agent == nullptr) return Fail("the agent cannot connect");
  absl::SleepFor(absl::Seconds(2));
  const int64_t cold_rss = common::ResidentBytes(pid).value_or(0);

  // Registers and ends jobs [from, to): each hello lists the next jobs and so ends the previous
  // ones; a last, empty hello ends the last ones.
  auto churn = [&](int from, int to) -> std::string {
    for (int next = from; next < to; next += per_hello) {
      std::vector<falcon::v1::JobRegistration> jobs;
      for (int i = next; i < std::min(to, next + per_hello); ++i) jobs.push_back(OneRankJob(i));
      std::unique_ptr<testing::LoopbackAgent> again = connect(std::move(jobs));
      if (again == nullptr) return absl::StrCat("hello with jobs from ", next, " failed");
      agent = std::move(again);
      if (absl::Now() > deadline) return "registering the jobs ran past --time_limit";
    }
    std::unique_ptr<testing::LoopbackAgent> last = connect({});
    if (last == nullptr) return "the last hello failed";
    agent = std::move(last);
    return "";
  };
  const std::string purged_series = "falcon_controller_retention_purged_total{kind=\"job\"}";
  // Waits until `n` jobs in all were purged.
  auto wait_purged = [&](int n) -> std::string {
    double purged = 0;
    while ((purged = Scrape(metrics_port, purged_series)) < n) {
      if (absl::Now() > deadline) {
        return absl::StrCat("only ", purged, " of ", n, " jobs purged by --time_limit");
      }
      absl::SleepFor(absl::Milliseconds(200));
    }
    return "";
  };

  const int warmup = absl::GetFlag(FLAGS_warmup_jobs);
  if (warmup > 0) {
    if (std::string e = churn(total, total + warmup); !e.empty()) return Fail(e);
    if (std::string e = wait_purged(warmup); !e.empty()) return Fail(e);
    absl::SleepFor(absl::Seconds(2));
  }
  const int64_t start_rss = common::ResidentBytes(pid).value_or(0);
  peak = start_rss;

  const absl::Time t0 = absl::Now();
  if (std::string e = churn(0, total); !e.empty()) return Fail(e);
  const absl::Duration registering = absl::Now() - t0;
  if (registering >= retention || Scrape(metrics_port, purged_series) > warmup) {
    std::fprintf(stderr,
                 "soak_bench: NOTE registering took %s, longer than --retention %s: the peak "
                 "does not hold every job at once\n",
                 absl::FormatDuration(registering).c_str(),
                 absl::FormatDuration(retention).c_str());
  }
  if (std::string e = wait_purged(warmup + total); !e.empty()) return Fail(e);
  const absl::Duration until_purged = absl::Now() - t0;
  auto control = falcon::v1::Control::NewStub(
      grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  falcon::v1::ListJobsResponse listed;
  grpc::Status s = control->ListJobs(&ctx, falcon::v1::ListJobsRequest(), &listed);
  if (!s.ok() || listed.jobs_size() != 0) {
    return Fail(absl::StrCat("ListJobs after the purge: ", s.error_message(), " ",
                             listed.jobs_size(), " jobs"));
  }
  // The sweep after the last purge (every retention / 10) returns what the store freed late.
  absl::SleepFor(std::max(absl::Seconds(2), retention / 10 + absl::Seconds(1)));
  const int64_t after_rss = common::ResidentBytes(pid).value_or(0);
  const double ratio = static_cast<double>(after_rss) / static_cast<double>(start_rss);
  const int64_t data_bytes = [&] {
    int64_t n = 0;
    for (const auto& e : std::filesystem::recursive_directory_iterator(dir + "/data")) {
      if (e.is_regular_file()) n += static_cast<int64_t>(e.file_size());
    }
    return n;
  }();

  std::printf("%-50s %14s\n", "figure", "value");
  std::printf("%-50s %14d\n", "jobs registered and ended", total);
  std::printf("%-50s %14s\n", "registering and ending them took",
              absl::FormatDuration(absl::Trunc(registering, absl::Milliseconds(1))).c_str());
  std::printf("%-50s %14s\n", "retention", absl::FormatDuration(retention).c_str());
  std::printf("%-50s %14s\n", "controller GLIBC_TUNABLES",
              absl::GetFlag(FLAGS_glibc_tunables).c_str());
  std::printf("%-50s %14s\n", "all purged after (from the first hello)",
              absl::FormatDuration(absl::Trunc(until_purged, absl::Milliseconds(1))).c_str());
  std::printf("%-50s %14.1f\n", "controller RSS cold (MiB)", MiB(cold_rss));
  std::printf("%-50s %14.1f\n", "controller RSS at start, after the warm-up (MiB)", MiB(start_rss));
  std::printf("%-50s %14.1f\n", "controller RSS peak (MiB)", MiB(peak.load()));
  std::printf("%-50s %14.1f\n", "controller RSS after purge (MiB)", MiB(after_rss));
  std::printf("%-50s %14.3f\n", "RSS after purge / at start", ratio);
  std::printf("%-50s %14.3f\n", "RSS after purge / cold",
              static_cast<double>(after_rss) / static_cast<double>(cold_rss));
  std::printf("%-50s %14.1f\n", "data directory after purge (MiB)", MiB(data_bytes));
  if (ratio > absl::GetFlag(FLAGS_max_ratio)) {
    return Fail(absl::StrFormat("RSS after purge is %.3f x the start, above --max_ratio %.2f",
                                ratio, absl::GetFlag(FLAGS_max_ratio)));
  }
  agent.reset();
  absl::StatusOr<common::ExitStatus> stopped = controller->Stop(SIGTERM, absl::Seconds(20));
  if (!stopped.ok() || !stopped->success()) return Fail("the controller did not stop cleanly");
  return 0;
}

}  // namespace
}  // namespace falcon::controller

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return falcon::controller::Run();
}
