#include "fleet/fleet_run.h"

#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/proc_stats.h"
#include "common/subprocess.h"
#include "common/testing/http_get.h"
#include "proto/falcon/v1/control.grpc.pb.h"
#include "tests/harness/local_cluster.h"

extern char** environ;

namespace falcon::fleet {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

double Scrape(int port, const std::string& series) {
  return common::testing::ScrapeValue(port, series).value_or(-1);
}

std::string Describe(const falcon::v1::Event& e) {
  std::string s = e.cause() == falcon::v1::CAUSE_COMPUTE         ? "compute"
                  : e.cause() == falcon::v1::CAUSE_COMMUNICATION ? "link"
                  : e.cause() == falcon::v1::CAUSE_UNKNOWN       ? "unknown"
                                                                 : "pending";
  if (e.ranks_size() > 0) absl::StrAppend(&s, " ranks=", absl::StrJoin(e.ranks(), ","));
  for (const falcon::v1::Link& l : e.links()) {
    absl::StrAppend(&s, " link=", l.src_rank(), "->", l.dst_rank());
  }
  return s;
}

absl::StatusOr<std::vector<falcon::v1::Event>> ListEvents(falcon::v1::Control::Stub* control) {
  std::vector<falcon::v1::Event> events;
  std::string token;
  do {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    falcon::v1::ListEventsRequest req;
    req.set_page_token(token);
    falcon::v1::ListEventsResponse resp;
    grpc::Status s = control->ListEvents(&ctx, req, &resp);
    if (!s.ok()) return absl::UnavailableError(absl::StrCat("ListEvents: ", s.error_message()));
    for (auto& e : *resp.mutable_events()) events.push_back(std::move(e));
    token = resp.next_page_token();
  } while (!token.empty());
  return events;
}

}  // namespace

bool RunResult::all_right() const {
  bool right = report.foreign == 0;
  for (const JobResult& j : jobs) right = right && j.right;
  return right;
}

absl::StatusOr<RunResult> RunFleet(const RunOptions& options) {
  absl::StatusOr<std::string> controller_bin =
      tests::harness::FindRunfile("controller/falcon_controller");
  if (!controller_bin.ok()) return controller_bin.status();
  absl::StatusOr<std::string> agents_bin = tests::harness::FindRunfile("fleet/fleet_agents");
  if (!agents_bin.ok()) return agents_bin.status();
  const char* tmp = getenv("TEST_TMPDIR");
  std::string tmpl = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/falcon_fleet_XXXXXX");
  if (mkdtemp(tmpl.data()) == nullptr) return absl::InternalError("cannot create a temp dir");
  const std::string dir = tmpl;
  struct Cleanup {
    std::string dir;
    ~Cleanup() {
      if (getenv("FALCON_FLEET_KEEP") == nullptr) std::filesystem::remove_all(dir);
    }
  } cleanup{dir};
  const absl::Time deadline = absl::Now() + options.time_limit;

  common::SpawnOptions spawn;
  spawn.argv = {*controller_bin,
                "--listen=127.0.0.1:0",
                "--plaintext",  // Loopback (docs/operations.md#tls).
                "--metrics_listen=127.0.0.1:0",
                absl::StrCat("--data_dir=", dir, "/data"),
                "--tick=100ms",
                "--max_streams_per_peer=1000000",
                "--max_ranks_per_job=16384"};
  for (const std::string& f : options.controller_flags) spawn.argv.push_back(f);
  // The allocator settings deploy/systemd/falcon-controller.service gives the controller.
  spawn.env.emplace();
  for (char** e = environ; *e != nullptr; ++e) {
    if (!absl::StartsWith(*e, "GLIBC_TUNABLES=")) spawn.env->push_back(*e);
  }
  spawn.env->push_back("GLIBC_TUNABLES=glibc.malloc.tcache_count=0");
  spawn.stdout_stream = common::Stdio::File(dir + "/controller.out");
  spawn.stderr_stream = common::Stdio::File(dir + "/controller.log");
  spawn.parent_death_signal = SIGKILL;
  absl::StatusOr<common::Subprocess> controller = common::Subprocess::Spawn(spawn);
  if (!controller.ok()) return controller.status();
  std::string address;
  int metrics_port = 0;
  while (address.empty() || metrics_port == 0) {
    if (absl::Now() > deadline) return absl::DeadlineExceededError("the controller did not start");
    std::stringstream out(ReadFile(dir + "/controller.out"));
    std::string line;
    while (std::getline(out, line)) {
      if (absl::StartsWith(line, "listening on ")) address = line.substr(13);
      if (absl::StartsWith(line, "metrics on ")) {
        if (!absl::SimpleAtoi(line.substr(line.rfind(':') + 1), &metrics_port)) metrics_port = 0;
      }
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  const int pid = controller->pid();

  const size_t nodes = options.scenario.Nodes().size();
  const size_t processes = std::max<size_t>(1, std::min<size_t>(options.processes, nodes));
  const std::string go_file = dir + "/go";
  const double registration_cpu0 = common::ProcessCpuSeconds(pid).value_or(-1);
  const absl::Time registration_t0 = absl::Now();
  std::vector<common::Subprocess> agents;
  for (size_t p = 0; p < processes; ++p) {
    common::SpawnOptions a;
    a.argv = {*agents_bin,
              absl::StrCat("--target=", address),
              absl::StrCat("--scenario=", EncodeScenario(options.scenario)),
              absl::StrCat("--from=", nodes * p / processes),
              absl::StrCat("--to=", nodes * (p + 1) / processes),
              absl::StrCat("--period=", absl::FormatDuration(options.period)),
              absl::StrCat("--seed=", options.seed),
              absl::StrCat("--noise_sigma=", options.noise.sigma),
              absl::StrCat("--noise_phi=", options.noise.phi),
              absl::StrCat("--replay_csv=", options.replay_csv),
              absl::StrCat("--go_file=", go_file),
              absl::StrCat("--report=", dir, "/report-", p),
              absl::StrCat("--peer_timing=", options.peer_timing ? "true" : "false")};
    a.stdout_stream = common::Stdio::File(absl::StrCat(dir, "/agents-", p, ".out"));
    a.stderr_stream = common::Stdio::File(absl::StrCat(dir, "/agents-", p, ".log"));
    a.parent_death_signal = SIGKILL;
    absl::StatusOr<common::Subprocess> s = common::Subprocess::Spawn(a);
    if (!s.ok()) return s.status();
    agents.push_back(std::move(*s));
  }
  for (size_t p = 0; p < processes; ++p) {
    while (!absl::StrContains(ReadFile(absl::StrCat(dir, "/agents-", p, ".out")), "ready")) {
      absl::StatusOr<std::optional<common::ExitStatus>> ended =
          agents[p].WaitFor(absl::ZeroDuration());
      if (absl::Now() > deadline || !ended.ok() || ended->has_value()) {
        return absl::UnavailableError(
            absl::StrCat("agents process ", p, " did not connect: ",
                         ReadFile(absl::StrCat(dir, "/agents-", p, ".log")).substr(0, 2000)));
      }
      absl::SleepFor(absl::Milliseconds(50));
    }
  }

  auto control = falcon::v1::Control::NewStub(
      grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  const double cpu0 = common::ProcessCpuSeconds(pid).value_or(-1);
  const double registration_s = absl::ToDoubleSeconds(absl::Now() - registration_t0);
  const double ingested0 =
      Scrape(metrics_port, "falcon_controller_ingest_iteration_summaries_total");
  const absl::Time t0 = absl::Now();
  std::ofstream(go_file).close();

  int64_t last_onset = 0;
  for (const JobSpec& j : options.scenario.jobs) {
    if (j.fault.kind != Fault::Kind::kNone) last_onset = std::max(last_onset, j.fault.onset);
  }
  std::vector<falcon::v1::Event> events;
  int result_late_polls = 0;
  double done_at = -1;  // Iteration at which every fault had a verdict.
  while (absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(500));
    const double iteration = (absl::Now() - t0) / options.period;
    absl::StatusOr<std::vector<falcon::v1::Event>> listed = ListEvents(control.get());
    if (!listed.ok()) {
      // An overloaded controller answers late: poll again (the run's time limit still holds).
      ++result_late_polls;
      continue;
    }
    events = std::move(*listed);
    if (done_at < 0) {
      bool all = iteration > static_cast<double>(last_onset);
      for (const JobSpec& j : options.scenario.jobs) {
        if (j.fault.kind == Fault::Kind::kNone) continue;
        bool verdict = false;
        for (const auto& e : events) {
          verdict = verdict || (e.job() == j.layout.job && e.verdict_iteration() >= 0);
        }
        all = all && verdict;
      }
      if (all) done_at = iteration;
    }
    if (done_at >= 0 && iteration >= std::max(done_at, static_cast<double>(last_onset)) +
                                         static_cast<double>(options.settle_iterations)) {
      break;
    }
  }
  RunResult result;
  result.ranks = options.scenario.Ranks();
  result.wall_s = absl::ToDoubleSeconds(absl::Now() - t0);
  result.registration_s = registration_s;
  result.late_polls = result_late_polls;
  result.registration_cpu_s = cpu0 - registration_cpu0;
  result.iterations = (absl::Now() - t0) / options.period;
  result.cpu_cores = (common::ProcessCpuSeconds(pid).value_or(-1) - cpu0) / result.wall_s;
  result.peak_rss_bytes = common::PeakResidentBytes(pid).value_or(0);
  result.summaries_per_s =
      (Scrape(metrics_port, "falcon_controller_ingest_iteration_summaries_total") - ingested0) /
      result.wall_s;

  for (size_t p = 0; p < processes; ++p) {
    absl::StatusOr<common::ExitStatus> stopped = agents[p].Stop(SIGTERM, absl::Seconds(60));
    if (!stopped.ok() || !stopped->success()) {
      return absl::UnavailableError(absl::StrCat("agents process ", p, " did not stop cleanly"));
    }
    absl::StatusOr<FleetReport> r = FleetReport::Parse(ReadFile(absl::StrCat(dir, "/report-", p)));
    if (!r.ok()) return r.status();
    result.report.Merge(*r);
  }
  if (result.report.streams_lost > 0) {
    return absl::UnavailableError(
        absl::StrCat(result.report.streams_lost,
                     " simulated agent streams ended before the run did (the controller closed "
                     "them or went away; 'stream lost' in the agents' logs, kept in ",
                     dir, " with FALCON_FLEET_KEEP=1): not a measurement"));
  }
  result.ack_p50 = result.report.ack_rtt.Quantile(0.5);
  result.ack_p99 = result.report.ack_rtt.Quantile(0.99);

  for (const JobSpec& j : options.scenario.jobs) {
    JobResult jr;
    jr.job = j.layout.job;
    jr.ranks = j.layout.world();
    jr.fault = j.fault;
    jr.verdict = "-";
    const falcon::v1::Event* event = nullptr;
    for (const auto& e : events) {
      if (e.job() != j.layout.job) continue;
      ++jr.events;
      if (event == nullptr || e.event_id() < event->event_id()) event = &e;
    }
    if (event != nullptr) {
      jr.verdict = Describe(*event);
      jr.localized_from_profiling = event->localized_from_profiling();
      jr.detection_delay = event->alarm_iteration() - j.fault.onset;
      jr.controller_onset = event->onset_iteration();
      if (event->verdict_iteration() >= 0) {
        jr.alarm_to_verdict_s =
            1e-9 * static_cast<double>(event->verdict_time_ns() - event->alarm_time_ns());
        jr.alarm_to_verdict_iterations = event->verdict_iteration() - event->alarm_iteration();
      }
    }
    switch (j.fault.kind) {
      case Fault::Kind::kNone:
        jr.right = jr.events == 0;
        break;
      case Fault::Kind::kCompute:
        jr.right = jr.events == 1 && event->cause() == falcon::v1::CAUSE_COMPUTE &&
                   event->ranks_size() == 1 && event->ranks(0) == j.fault.rank;
        break;
      case Fault::Kind::kLink: {
        JobModel model(j.layout, j.fault, options.noise, options.seed, 1);
        jr.right = jr.events == 1 && event->cause() == falcon::v1::CAUSE_COMMUNICATION &&
                   event->links_size() == 1 && event->links(0).src_rank() == j.fault.rank &&
                   event->links(0).dst_rank() == model.link_dst();
        break;
      }
    }
    for (const auto& [key, t] : result.report.tasks) jr.validation_tasks += key.first == jr.job;
    for (const auto& [key, d] : result.report.directives) {
      if (key.first == jr.job && d.kind == "pause") {
        jr.pause_fanout_ms =
            std::max(jr.pause_fanout_ms, 1e-6 * static_cast<double>(d.last_ns - d.first_ns));
      }
    }
    result.jobs.push_back(std::move(jr));
  }
  absl::StatusOr<common::ExitStatus> stopped = controller->Stop(SIGTERM, absl::Seconds(60));
  if (!stopped.ok() || !stopped->success()) {
    return absl::UnavailableError("the controller did not stop cleanly");
  }
  return result;
}

}  // namespace falcon::fleet
