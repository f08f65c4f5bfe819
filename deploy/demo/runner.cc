#include "deploy/demo/runner.h"

#include <algorithm>
#include <map>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cluster/cluster_spec.h"
#include "deploy/demo/fault_schedule.h"
#include "deploy/demo/kernel_fault_thread.h"
#include "deploy/demo/live.h"
#include "grpcpp/grpcpp.h"

namespace falcon::deploy::demo {
namespace {

constexpr absl::Duration kPollPeriod = absl::Seconds(1);
constexpr absl::Duration kRpcDeadline = absl::Seconds(3);

void SetDeadline(grpc::ClientContext& ctx, absl::Duration d = kRpcDeadline) {
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + d));
}

// What the runner has seen of the job so far (kept so an interrupted run still reports).
struct Observed {
  falcon::v1::Job job;
  bool job_known = false;
  std::map<uint64_t, falcon::v1::Event> events;
  std::map<int64_t, falcon::v1::HistoryPoint> history;
  std::vector<uint64_t> listed_ids;  // Event ids of the last successful ListEvents.
};

// One poll: job, events, new history. Returns false when the controller did not answer.
bool Poll(falcon::v1::Control::StubInterface* control, const std::string& job, Observed& seen) {
  bool answered = false;
  {
    grpc::ClientContext ctx;
    SetDeadline(ctx);
    falcon::v1::GetJobRequest req;
    req.set_job(job);
    falcon::v1::Job reply;
    grpc::Status s = control->GetJob(&ctx, req, &reply);
    if (s.ok()) {
      seen.job = reply;
      seen.job_known = true;
      answered = true;
    } else if (s.error_code() == grpc::StatusCode::NOT_FOUND) {
      answered = true;  // Not registered yet.
    }
  }
  if (!seen.job_known) return answered;
  {
    grpc::ClientContext ctx;
    SetDeadline(ctx);
    falcon::v1::ListEventsRequest req;
    req.set_job(job);
    falcon::v1::ListEventsResponse reply;
    if (control->ListEvents(&ctx, req, &reply).ok()) {
      seen.listed_ids.clear();
      for (const auto& e : reply.events()) {
        seen.events[e.event_id()] = e;
        seen.listed_ids.push_back(e.event_id());
      }
    }
  }
  {
    grpc::ClientContext ctx;
    SetDeadline(ctx);
    falcon::v1::GetHistoryRequest req;
    req.set_job(job);
    int64_t from = seen.history.empty() ? 0 : seen.history.rbegin()->first - 2;
    req.set_from_iteration(std::max<int64_t>(0, from));
    req.set_max_points(10000);
    falcon::v1::GetHistoryResponse reply;
    if (control->GetHistory(&ctx, req, &reply).ok()) {
      for (const auto& p : reply.points()) seen.history[p.iteration()] = p;
    }
  }
  return answered;
}

// Applies `settings` for `job` ("" = defaults for new jobs); false when it failed.
bool ApplySettings(falcon::v1::Control::StubInterface* control, falcon::v1::Settings settings,
                   const std::string& job, std::string* error) {
  settings.set_job(job);
  grpc::ClientContext ctx;
  SetDeadline(ctx);
  falcon::v1::SetSettingsRequest req;
  *req.mutable_settings() = settings;
  falcon::v1::Settings reply;
  grpc::Status s = control->SetSettings(&ctx, req, &reply);
  if (!s.ok()) *error = s.error_message();
  return s.ok();
}

}  // namespace

falcon::v1::Settings DemoSettings() {
  falcon::v1::Settings s;
  s.set_s3_cost_seconds(5);
  // S2L off (falcon_demo --s2l turns it on), as in the controller: it is opt-in (over 10 compute
  // runs on the netns cluster it recovered a median 0.78 of the slowdown, S2 alone 0.75).
  s.set_s2l_enabled(false);
  // The paper's threshold: bursts of outside load (10-46% for up to ~40 iterations on a loaded
  // 2-core machine) slow every rank's compute alike and open no event
  // (docs/algorithms.md#environment-shifts).
  s.set_verification_min_ratio(0.10);
  return s;
}

int MicroBatches(const RunOptions& options) {
  if (options.micro_batches > 0) return options.micro_batches;
  return 8 * options.scenario.layout.dp * options.scenario.layout.pp;
}

absl::Duration EstimatedIterationTime(const Layout& layout, int micro_batches,
                                      double emulated_compute_ms) {
  const double per_group = static_cast<double>(micro_batches) / std::max(1, layout.dp);
  const double slots = per_group + layout.pp - 1;
  // Forward X + backward 2X per slot; as much again for messages, real compute, the DP
  // all-reduce and scheduling on a busy CPU (measured: ~0.31 s at 4x2, 64 micro-batches, 3 ms).
  return absl::Milliseconds(slots * 3 * emulated_compute_ms * 1.8 + 30);
}

std::vector<std::string> TrainArgs(const RunOptions& options) {
  const Scenario& s = options.scenario;
  std::vector<std::string> args = {
      absl::StrCat("--dp=", s.layout.dp),
      absl::StrCat("--pp=", s.layout.pp),
      absl::StrCat("--nodes=", s.nodes),
      absl::StrCat("--micro-batches=", MicroBatches(options)),
      absl::StrCat("--steps=", s.iterations),
      absl::StrCat("--job=", options.job),
      absl::StrFormat("--emulated_compute_ms=%g", options.emulated_compute_ms),
      // A validation GEMM repetition's emulated device time: 20 forward micro-batches' worth
      // (60 ms at 3 ms), two periods of the kernel fault driver's CPU quota (30 ms). A repetition
      // shorter than a period can run on a period's unspent quota at full speed, and the
      // fastest of three read a x1.5 quota as 1.26x (12 ms repetitions); 8 ranks at once on 2
      // cores also vary less over a longer repetition. Validation keeps ~0.3 s of GEMM.
      absl::StrFormat("--emulated_gemm_ms=%g", 20 * options.emulated_compute_ms),
      // A link message's wire time: 4 forward micro-batches' worth (the trainer's default, 10,
      // made each 4 MiB pass cost 6 x 55 ms and diluted a slow link's transfer; 4x still keeps
      // CPU noise small beside it).
      absl::StrFormat("--emulated_link_ms=%g", 4 * options.emulated_compute_ms),
      // A small real model: the emulated compute dominates, so iteration times are stable.
      "--hidden=32",
      "--embed=16",
      "--batch=8",
      // 8 blocks per stage: enough for S2L to move a few out of a slow stage (1 block per stage
      // gives it nothing to move). The emulated time of a stage scales with the blocks it holds,
      // so the healthy iteration time does not depend on the count.
      absl::StrCat("--layers=", 8 * s.layout.pp),
      "--print_every=0",
      // A slow device (emulated) does not steal host CPU: compute faults sleep, not spin.
      "--noburn_compute_faults",
  };
  if (s.injection == FaultInjection::kInProcess) {
    // Faults inside the trainer stretch device time themselves: a fixed-speed device keeps
    // outside load on the shared CPUs from moving it (trainer/device/emulated_device.h).
    args.push_back("--emulated_device_duty=0");
    if (!s.faults.empty()) args.push_back(absl::StrCat("--faults=", s.FaultSpec()));
  } else {
    // A CPU quota on the device thread slows it (what of_nominal faults divide).
    args.push_back(absl::StrFormat("--emulated_device_duty=%g", kEmulatedDeviceDuty));
  }
  if (s.pin_cpus) args.push_back("--pin_cpus");
  args.insert(args.end(), s.train_args.begin(), s.train_args.end());
  args.insert(args.end(), options.extra_train_args.begin(), options.extra_train_args.end());
  return args;
}

ClusterSpec ClusterSpecFor(const RunOptions& options) {
  const Scenario& scenario = options.scenario;
  ClusterSpec spec;
  spec.job = options.job;
  spec.layout = scenario.layout;
  spec.nodes = scenario.nodes;
  spec.netns = scenario.injection == FaultInjection::kKernel;
  spec.work_dir = options.work_dir;
  spec.train_args = TrainArgs(options);
  spec.controller_args = options.controller_args;
  if (spec.netns) {
    // Validation's link passes cross the veths and their bandwidth caps: 16 KiB (0.26 s through
    // a 0.5 Mbit/s cap, next to the emulated wire time of a healthy link) instead of MiBs, which
    // would take seconds per message through a capped link and hold the job paused.
    for (std::string& a : spec.controller_args) {
      if (absl::StartsWith(a, "--validation_link_bytes=")) a = "--validation_link_bytes=16384";
    }
  }
  return spec;
}

absl::StatusOr<Report> RunScenario(const RunOptions& options, const ClusterFactory& factory) {
  const Scenario& scenario = options.scenario;
  RunSettings settings;
  settings.scenario = scenario.name;
  settings.layout = scenario.layout;
  settings.nodes = scenario.nodes;
  settings.iterations = scenario.iterations;
  settings.micro_batches = MicroBatches(options);
  settings.emulated_compute_ms = options.emulated_compute_ms;
  settings.duration_s = absl::ToDoubleSeconds(options.duration);
  settings.time_limit_s = absl::ToDoubleSeconds(options.time_limit);
  settings.fault_spec = scenario.FaultSpec();
  settings.train_args = TrainArgs(options);
  falcon::v1::Settings controller_settings = options.settings;
  if (scenario.s4_cost_seconds > 0)
    controller_settings.set_s4_cost_seconds(scenario.s4_cost_seconds);
  settings.controller_settings = controller_settings;
  settings.warmup_iterations = options.warmup_iterations;

  const ClusterSpec spec = ClusterSpecFor(options);
  settings.cluster = std::string(falcon::cluster::ClusterKindName(
      spec.netns ? falcon::cluster::ClusterKind::kNetns : falcon::cluster::ClusterKind::kLoopback));

  const absl::Time start = absl::Now();
  absl::StatusOr<std::unique_ptr<Cluster>> cluster = factory(spec);
  if (!cluster.ok()) return cluster.status();
  const bool kernel = scenario.injection == FaultInjection::kKernel;
  settings.fault_injection = FaultInjectionName(scenario.injection);
  if (kernel && !(*cluster)->InjectsFaults()) {
    (*cluster)->Stop();
    return absl::FailedPreconditionError(
        "kernel fault injection asked for, but the cluster has no fault driver (it needs a "
        "netns cluster)");
  }
  std::unique_ptr<KernelFaultThread> injector;
  if (kernel && !scenario.faults.empty()) {
    // Faults wait for detection to be armed (FaultSchedule::HoldUntilArmed): one that starts
    // during the detectors' warm-up would be learned as the healthy level.
    injector = std::make_unique<KernelFaultThread>(cluster->get(), scenario.faults,
                                                   /*hold_until_armed=*/true);
  }

  falcon::v1::Settings initial = controller_settings;
  const bool warmup = options.warmup_iterations > 0;
  if (warmup) initial.set_detection_enabled(false);
  const bool has_settings = initial.ByteSizeLong() > 0;
  std::string settings_error;
  if (has_settings && !ApplySettings((*cluster)->control(), initial, "", &settings_error)) {
    (*cluster)->Stop();
    return absl::FailedPreconditionError(
        absl::StrCat("SetSettings (defaults) failed: ", settings_error));
  }
  bool job_settings_applied = !has_settings;
  bool warmup_done = false;

  Observed seen;
  std::string note;
  bool interrupted = false;
  bool restarted = false;
  std::vector<uint64_t> ids_before_restart;
  absl::Time last_answer = absl::Now();
  for (absl::Time next = absl::Now();; next += kPollPeriod) {
    if (options.stop != nullptr && options.stop->load()) {
      interrupted = true;
      note = "stopped by signal";
      break;
    }
    if (absl::Now() - start > options.time_limit) {
      note = absl::StrCat("time limit ", absl::FormatDuration(options.time_limit), " reached");
      break;
    }
    bool answered = Poll((*cluster)->control(), options.job, seen);
    if (answered) last_answer = absl::Now();
    if (injector != nullptr && seen.job.has_detection_armed_iteration()) {
      injector->DetectionArmed(seen.job.detection_armed_iteration());
    }
    if (seen.job_known && !job_settings_applied) {
      job_settings_applied =
          ApplySettings((*cluster)->control(), initial, options.job, &settings_error);
    }
    if (warmup && !warmup_done && seen.job_known &&
        seen.job.last_iteration() >= options.warmup_iterations) {
      falcon::v1::Settings on;
      on.set_detection_enabled(true);
      warmup_done = ApplySettings((*cluster)->control(), on, options.job, &settings_error);
    }
    if (absl::Now() - last_answer > absl::Seconds(30)) {
      note = "the controller stopped answering";
      break;
    }
    if (options.live) {
      std::vector<falcon::v1::Event> active;
      for (uint64_t id : seen.job.active_event_ids()) {
        auto it = seen.events.find(id);
        if (it != seen.events.end()) active.push_back(it->second);
      }
      options.live(LiveLine(absl::ToDoubleSeconds(absl::Now() - start), seen.job, active));
    }
    if (!restarted && scenario.restart_controller_at_iteration >= 0 &&
        seen.job.last_iteration() >= scenario.restart_controller_at_iteration) {
      restarted = true;
      Poll((*cluster)->control(), options.job, seen);
      ids_before_restart = seen.listed_ids;
      if (options.live) options.live("restarting the controller (same data dir)");
      absl::Status s = (*cluster)->RestartController();
      if (!s.ok()) {
        note = absl::StrCat("controller restart failed: ", s.message());
        break;
      }
      last_answer = absl::Now();
    }
    if (seen.job_known && seen.job.last_iteration() >= scenario.iterations - 1) break;
    if ((*cluster)->TrainerExited()) {
      // The agents forward the last iterations within a report period: poll until the last one
      // arrived (or a few seconds passed), so every count of the report is the trainer's.
      for (int i = 0; i < 3; ++i) {
        Poll((*cluster)->control(), options.job, seen);
        if (seen.job.last_iteration() >= scenario.iterations - 1) break;
        absl::SleepFor(kPollPeriod);
      }
      if (seen.job.last_iteration() < scenario.iterations * 95 / 100) {
        note = absl::StrCat("the trainer exited at iteration ", seen.job.last_iteration());
      }
      break;
    }
    absl::SleepFor(std::max(absl::ZeroDuration(), next + kPollPeriod - absl::Now()));
  }
  // Final state: the last events as the controller closes them.
  Poll((*cluster)->control(), options.job, seen);
  Scenario scored = scenario;
  if (injector != nullptr) {
    injector->Finish();
    // Score against what was really applied: the windows the driver's faults were in force.
    for (size_t i = 0; i < scored.faults.size(); ++i) {
      if (injector->applied()[i] < 0) {
        // Not applied: the driver failed (its window stays as planned, and the report says why),
        // or the run ended before the window.
        scored.faults[i].not_applied = injector->apply_errors()[i];
        if (scored.faults[i].not_applied.empty()) {
          scored.faults[i].from_iteration = scored.faults[i].to_iteration = scenario.iterations;
        }
        continue;
      }
      scored.faults[i].from_iteration = injector->applied()[i];
      if (injector->removed()[i] >= 0) scored.faults[i].to_iteration = injector->removed()[i];
    }
    for (const std::string& e : injector->errors()) {
      note = note.empty() ? e : absl::StrCat(note, "; ", e);
    }
    settings.ground_truth_json = (*cluster)->FaultRecordJson();
  }
  (*cluster)->Stop();
  const double wall_s = absl::ToDoubleSeconds(absl::Now() - start);

  std::vector<falcon::v1::HistoryPoint> history;
  for (auto& [it, p] : seen.history) history.push_back(p);
  std::vector<falcon::v1::Event> events;
  for (auto& [id, e] : seen.events) events.push_back(e);
  Report report = BuildReport(scored, settings, std::move(history), events);
  report.interrupted = interrupted;
  report.wall_time_s = wall_s;
  report.note = note;
  report.event_ids_before_restart = ids_before_restart;
  report.event_ids_at_end = seen.listed_ids;
  if (seen.job_known) report.job_at_end = JobAtEndOf(seen.job);
  return report;
}

}  // namespace falcon::deploy::demo
