// falcon_train: the reference DP x PP trainer (`./falcon train`).
//
//   falcon_train --dp D --pp P --micro-batches M --steps N [--layers L --hidden H --seed S
//                --checkpoint-dir DIR --resume DIR --faults SPEC --directives FILE
//                --events-log FILE --nodes K] --json-log FILE
//
// Started by hand it is the launcher: it checks the configuration, starts D x P rank processes
// of itself through the collective launcher (collective/launch/launcher.h; each rank sees
// FALCON_RANK etc.), and when the ranks exit with kExitCheckpointRestart after an S4 directive it
// restarts them on the layout without the excluded ranks (checkpoint/restart_plan.h), resuming from
// the checkpoint. Started by the launcher (FALCON_RANK set) it is one rank (worker.h).
//
// Flag names accept '-' or '_' (--json-log == --json_log). Every flag is checked before any rank
// starts (ranges in --help; files and directories exist and are of the right kind; no positional
// arguments). The launcher's control directory ($TMPDIR, else /tmp: falcon_train.XXXXXX) is
// removed when it exits. Exit status: 0 done (and --help, which prints every flag on stdout); 2
// bad flags or configuration; otherwise the launcher's (a failing rank's code, or 128 + signal).
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "cli/help/flags_help.h"
#include "cluster/cluster_spec.h"
#include "collective/fault/fault_spec.h"
#include "collective/launch/launcher.h"
#include "collective/launch/rank_env.h"
#include "common/flag_checks.h"
#include "common/json_parse.h"
#include "common/logging/logging.h"
#include "common/names.h"
#include "common/text_file.h"
#include "nlohmann/json.hpp"
#include "trainer/checkpoint/restart_plan.h"
#include "trainer/directives/micro_batch_plan.h"
#include "trainer/directives/scripted_hooks.h"
#include "trainer/directives/shim_hooks.h"
#include "trainer/model/corpus.h"
#include "trainer/model/model_config.h"
#include "trainer/worker.h"

ABSL_FLAG(int, dp, 4, "data-parallel groups (model replicas)");
ABSL_FLAG(int, pp, 2, "pipeline stages");
ABSL_FLAG(int, micro_batches, 8, "micro-batches per global batch (a multiple of --pp)");
ABSL_FLAG(int64_t, steps, 50,
          "train until this many iterations are done in all (a resumed run continues to it), "
          "[0, 10^9]");
ABSL_FLAG(int, layers, 4, "MLP blocks of the model (>= --pp)");
ABSL_FLAG(int, hidden, 128, "width of the residual stream");
ABSL_FLAG(int, ffn, 0, "inner width of each block, [0, 65536] (0: 2 x --hidden)");
ABSL_FLAG(int, context, 8, "characters of context per example");
ABSL_FLAG(int, embed, 32, "embedding width per character");
ABSL_FLAG(int, batch, 128, "examples per micro-batch");
ABSL_FLAG(double, lr, 2e-3, "Adam learning rate, (0, 1]");
ABSL_FLAG(uint64_t, seed, 1, "seed of initialization and data sampling");
ABSL_FLAG(std::string, data, falcon::trainer::model::kDefaultCorpusPath, "training text");
ABSL_FLAG(std::string, checkpoint_dir, "",
          "final checkpoint goes here; relative S4 checkpoint dirs resolve against it");
ABSL_FLAG(std::string, resume, "", "resume from this checkpoint directory (must exist)");
ABSL_FLAG(std::string, json_log, "", "one JSON line per iteration per rank (truncated at start)");
ABSL_FLAG(std::string, faults, "", "fault spec or @FILE (collective/fault/fault_spec.h)");
ABSL_FLAG(bool, burn_compute_faults, true,
          "compute faults burn CPU (visible on shared cores); --noburn_compute_faults sleeps "
          "instead (a slow device the host waits for)");
ABSL_FLAG(std::string, directives, "", "directive script for standalone runs (scripted_hooks.h)");
ABSL_FLAG(std::string, events_log, "", "acks and validation results of the scripted hooks");
ABSL_FLAG(int, nproc, 0, "rank processes (0: dp x pp); must equal dp x pp");
ABSL_FLAG(int, nodes, 1, "emulated nodes the ranks are grouped into");
ABSL_FLAG(bool, pin_cpus, false, "pin rank r to the r-th CPU (for contention faults)");
ABSL_FLAG(std::string, cluster, "",
          "cluster description (cluster.json, cluster/cluster_spec.h) whose nodes the ranks run "
          "on: each rank inside its node's network namespace, Gloo on the node's address; "
          "default: every rank on loopback");
ABSL_FLAG(std::string, rank_table, "",
          "where the launcher writes the rank table (rank, node, pid; rewritten after every S4 "
          "restart) for tools outside the job such as the fault driver; default: none");
ABSL_FLAG(int, comm_timeout_ms, 60000, "communicator timeout (a dead peer fails ops after this)");
ABSL_FLAG(int, max_restarts, 3, "S4 restarts allowed before giving up, [0, 100]");
ABSL_FLAG(int, print_every, 10,
          "rank 0 prints progress every this many iterations (0: never), [0, 10^9]");
ABSL_FLAG(std::string, job, "falcon-train",
          "job name the ranks report to the node agent ([A-Za-z0-9._-], 1-128 bytes)");
ABSL_FLAG(std::string, agent_socket, "",
          "node agent's unix socket; '{node}' is replaced by the rank's emulated node name "
          "(node0, node1, ...). With it every rank runs the Falcon shim; default: env "
          "FALCON_AGENT_SOCKET, else none");
ABSL_FLAG(double, emulated_compute_ms, 0,
          "emulated device time per micro-batch forward per stage in ms (backward 2x), for a "
          "stage of --layers/--pp blocks (a stage of k blocks: x k/(layers/pp)), on the rank's "
          "emulated accelerator (its speed follows the CPU the rank gets); 0: none");
ABSL_FLAG(double, emulated_device_duty, 0.1,
          "share of a core the emulated accelerator's clock asks for, busy or idle, in [0, 1]; "
          "its device time runs at the share of that it gets; 0: a fixed-speed device that "
          "only sleeps (for faults injected inside the trainer)");
ABSL_FLAG(double, emulated_gemm_ms, -1,
          "emulated device time of one validation GEMM repetition in ms, on the emulated "
          "accelerator; -1: 10x --emulated_compute_ms");
ABSL_FLAG(double, emulated_link_ms, -1,
          "emulated wire time of one validation link-pass message in ms, slept by its sender so "
          "CPU copy noise is small beside it; -1: 10x --emulated_compute_ms");
ABSL_FLAG(std::string, restart_file, "", "internal: where rank 0 leaves an S4 restart request");
ABSL_FLAG(uint64_t, epoch, 0,
          "internal: the job epoch the ranks start at, in their shim hello (after an S4 restart: "
          "its directive's, so the agent and the controller take the new layout)");

namespace falcon::trainer {
namespace {

constexpr int kExitBadConfig = 2;

TrainerOptions TrainerOptionsFromFlags() {
  TrainerOptions o;
  o.model.context = absl::GetFlag(FLAGS_context);
  o.model.embed_dim = absl::GetFlag(FLAGS_embed);
  o.model.hidden = absl::GetFlag(FLAGS_hidden);
  o.model.ffn = absl::GetFlag(FLAGS_ffn) > 0 ? absl::GetFlag(FLAGS_ffn) : 2 * o.model.hidden;
  o.model.num_blocks = absl::GetFlag(FLAGS_layers);
  o.model.micro_batch_size = absl::GetFlag(FLAGS_batch);
  o.adam.learning_rate = static_cast<float>(absl::GetFlag(FLAGS_lr));
  o.dp = absl::GetFlag(FLAGS_dp);
  o.pp = absl::GetFlag(FLAGS_pp);
  o.micro_batches = absl::GetFlag(FLAGS_micro_batches);
  o.steps = absl::GetFlag(FLAGS_steps);
  o.seed = absl::GetFlag(FLAGS_seed);
  o.checkpoint_dir = absl::GetFlag(FLAGS_checkpoint_dir);
  o.resume_dir = absl::GetFlag(FLAGS_resume);
  o.json_log_path = absl::GetFlag(FLAGS_json_log);
  o.restart_file = absl::GetFlag(FLAGS_restart_file);
  o.emulated_compute = absl::Microseconds(absl::GetFlag(FLAGS_emulated_compute_ms) * 1e3);
  o.emulated_device.duty = absl::GetFlag(FLAGS_emulated_device_duty);
  if (const double gemm_ms = absl::GetFlag(FLAGS_emulated_gemm_ms); gemm_ms >= 0) {
    o.emulated_gemm = absl::Microseconds(gemm_ms * 1e3);
  }
  if (const double link_ms = absl::GetFlag(FLAGS_emulated_link_ms); link_ms >= 0) {
    o.emulated_link = absl::Microseconds(link_ms * 1e3);
  }
  return o;
}

// Prints rank 0's progress.
class ProgressHooks : public TrainerHooks {
 public:
  ProgressHooks(TrainerHooks* inner, int rank, int every)
      : inner_(inner), rank_(rank), every_(every) {}
  void OnLayout(const RankContext& c) override { inner_->OnLayout(c); }
  void OnIteration(const IterationReport& r) override {
    inner_->OnIteration(r);
    if (every_ > 0 && (r.iteration + 1) % every_ == 0) {
      std::printf("iteration %lld  loss %.4f  %.1f ms/iteration  plan %lld\n",
                  static_cast<long long>(r.iteration), r.loss, r.iteration_time_s * 1e3,
                  static_cast<long long>(r.plan_version));
      std::fflush(stdout);
    }
  }
  std::vector<falcon::v1::Directive> PollDirectives(int64_t it) override {
    return inner_->PollDirectives(it);
  }
  void Ack(const falcon::v1::Directive& d, falcon::v1::AckStatus s, const std::string& reason,
           int64_t applied) override {
    inner_->Ack(d, s, reason, applied);
    // One line per rank and outcome: "directive 3 rank 2: APPLIED micro-batches per DP group: ..."
    std::printf(
        "directive %llu rank %d: %s %s\n", static_cast<unsigned long long>(d.directive_id()), rank_,
        std::string(absl::StripPrefix(falcon::v1::AckStatus_Name(s), "ACK_STATUS_")).c_str(),
        reason.c_str());
    std::fflush(stdout);
  }
  std::vector<falcon::v1::ValidationTask> PollValidationTasks(int64_t it) override {
    return inner_->PollValidationTasks(it);
  }
  void ReportValidation(const falcon::v1::ValidationResult& r) override {
    inner_->ReportValidation(r);
  }
  void RegisterValidationExecutor(directives::ValidationExecutor* e) override {
    inner_->RegisterValidationExecutor(e);
  }

 private:
  TrainerHooks* inner_;
  int rank_;
  int every_;
};

// --agent_socket, else FALCON_AGENT_SOCKET; "" when neither.
std::string AgentSocketTemplate() {
  std::string s = absl::GetFlag(FLAGS_agent_socket);
  if (s.empty()) {
    const char* env = std::getenv("FALCON_AGENT_SOCKET");
    if (env != nullptr) s = env;
  }
  return s;
}

// Checks the flags a rank would only find fault with after the launch (or never): ranges,
// paths, the Falcon flags (--job, --agent_socket, --emulated_compute_ms, --emulated_gemm_ms,
// --emulated_link_ms); "" when fine.
std::string CheckFlags() {
  const std::string job = absl::GetFlag(FLAGS_job);
  if (absl::Status s = falcon::common::ValidateJobName(job, "--job"); !s.ok()) {
    return std::string(s.message());
  }
  const double ms = absl::GetFlag(FLAGS_emulated_compute_ms);
  if (!(ms >= 0 && ms <= 10000)) {
    return absl::StrCat("--emulated_compute_ms ", ms, ": need a number in [0, 10000]");
  }
  const double duty = absl::GetFlag(FLAGS_emulated_device_duty);
  if (!(duty >= 0 && duty <= 1)) {
    return absl::StrCat("--emulated_device_duty ", duty, ": need a number in [0, 1]");
  }
  for (const auto& [flag, value] :
       {std::pair<const char*, double>{"--emulated_gemm_ms", absl::GetFlag(FLAGS_emulated_gemm_ms)},
        std::pair<const char*, double>{"--emulated_link_ms",
                                       absl::GetFlag(FLAGS_emulated_link_ms)}}) {
    if (!(value == -1 || (value >= 0 && value <= 10000))) {
      return absl::StrCat(flag, " ", value, ": need -1 or a number in [0, 10000]");
    }
  }
  const double lr = absl::GetFlag(FLAGS_lr);
  if (!(lr > 0 && lr <= 1)) return absl::StrCat("--lr: ", lr, " is not a number in (0, 1]");
  if (absl::Status s = falcon::common::CheckIntegersIn({
          {"--steps", absl::GetFlag(FLAGS_steps), 0, 1000000000},
          {"--ffn", absl::GetFlag(FLAGS_ffn), 0, 65536},
          {"--max_restarts", absl::GetFlag(FLAGS_max_restarts), 0, 100},
          {"--print_every", absl::GetFlag(FLAGS_print_every), 0, 1000000000},
      });
      !s.ok()) {
    return std::string(s.message());
  }
  if (const std::string dir = absl::GetFlag(FLAGS_checkpoint_dir); !dir.empty()) {
    if (absl::Status s = falcon::common::CheckDirectoryPath(dir, "--checkpoint_dir"); !s.ok()) {
      return std::string(s.message());
    }
  }
  if (const std::string dir = absl::GetFlag(FLAGS_resume); !dir.empty()) {
    struct stat st;
    if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      return absl::StrCat("--resume: '", dir, "' is not a directory");
    }
  }
  const std::string socket = AgentSocketTemplate();
  if (!socket.empty() && !absl::GetFlag(FLAGS_directives).empty()) {
    return "--directives and --agent_socket (or FALCON_AGENT_SOCKET) exclude each other: "
           "directives come from the script or from Falcon";
  }
  if (!socket.empty()) {
    const std::string example = absl::StrReplaceAll(socket, {{"{node}", "node0"}});
    if (example.size() >= 108) {
      return absl::StrCat("--agent_socket '", socket, "': a unix socket path must be < 108 bytes");
    }
    if (socket.find('{') != std::string::npos && socket.find("{node}") == std::string::npos) {
      return absl::StrCat("--agent_socket '", socket, "': the only placeholder is {node}");
    }
  }
  if (const std::string script = absl::GetFlag(FLAGS_directives); !script.empty()) {
    if (absl::Status s = directives::LoadDirectiveScript(script).status(); !s.ok()) {
      return absl::StrCat("--directives: ", s.message());
    }
  }
  return "";
}

// The launcher's control directory (where rank 0 leaves an S4 restart request), removed with
// what it holds when the launcher returns, however it returns.
class ControlDir {
 public:
  static absl::StatusOr<std::unique_ptr<ControlDir>> Create() {
    const char* tmp = std::getenv("TMPDIR");
    std::string path =
        absl::StrCat(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp", "/falcon_train.XXXXXX");
    if (mkdtemp(path.data()) == nullptr) {
      return absl::InternalError(
          absl::StrCat("cannot create a control directory '", path, "': ", std::strerror(errno)));
    }
    return std::unique_ptr<ControlDir>(new ControlDir(std::move(path)));
  }
  ~ControlDir() {
    std::remove(restart_file().c_str());
    if (::rmdir(path_.c_str()) != 0) {
      std::fprintf(stderr, "falcon_train: cannot remove the control directory '%s': %s\n",
                   path_.c_str(), std::strerror(errno));
    }
  }
  std::string restart_file() const { return path_ + "/restart.json"; }

 private:
  explicit ControlDir(std::string path) : path_(std::move(path)) {}
  const std::string path_;
};

// Rank 0's S4 restart request (written by this program, checked all the same: never an
// exception). kInvalidArgument naming what is missing.
struct RestartRequest {
  std::string checkpoint_dir;
  std::vector<int> excluded_ranks;
  uint64_t epoch = 0;  // The S4 directive's job epoch (0 when the request has none).
};

absl::StatusOr<RestartRequest> ReadRestartRequest(const std::string& path) {
  absl::StatusOr<std::string> text = falcon::common::ReadTextFile(path, 1 << 20);
  if (!text.ok()) return text.status();
  absl::StatusOr<nlohmann::json> j = falcon::common::ParseJson(*text, path);
  if (!j.ok()) return j.status();
  RestartRequest r;
  if (!j->is_object() || !j->contains("checkpoint_dir") || !(*j)["checkpoint_dir"].is_string()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": no \"checkpoint_dir\" string"));
  }
  r.checkpoint_dir = (*j)["checkpoint_dir"].get<std::string>();
  if (j->contains("excluded_ranks")) {
    const nlohmann::json& ranks = (*j)["excluded_ranks"];
    if (!ranks.is_array()) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": \"excluded_ranks\" is not an array"));
    }
    for (const nlohmann::json& rank : ranks) {
      if (!rank.is_number_integer() || rank.get<int64_t>() < 0 || rank.get<int64_t>() > 4096) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, ": \"excluded_ranks\" holds ", rank.dump(), ", not a rank"));
      }
      r.excluded_ranks.push_back(rank.get<int>());
    }
  }
  if (j->contains("epoch")) {
    const nlohmann::json& epoch = (*j)["epoch"];
    if (!epoch.is_number_unsigned() && !(epoch.is_number_integer() && epoch.get<int64_t>() >= 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": \"epoch\" holds ", epoch.dump(), ", not an epoch"));
    }
    r.epoch = epoch.get<uint64_t>();
  }
  return r;
}

int RunRank(const collective::launch::RankEnv& env) {
  if (env.backend != "gloo") {
    std::fprintf(stderr,
                 "falcon_train rank %d: backend '%s' is not supported: the reference trainer "
                 "computes on the CPU and communicates through Gloo\n",
                 env.rank, env.backend.c_str());
    return kExitBadConfig;
  }
  WorkerOptions o;
  o.trainer = TrainerOptionsFromFlags();
  o.trainer.dp = env.dp;  // The launcher's layout wins (it changes after an S4 restart).
  o.trainer.pp = env.pp;
  o.data_path = absl::GetFlag(FLAGS_data);
  o.rank = env.rank;
  o.world_size = env.world_size;
  o.rendezvous_dir = env.rendezvous_dir;
  o.faults = env.faults;
  o.burn_compute_faults = absl::GetFlag(FLAGS_burn_compute_faults);
  o.directives_path = absl::GetFlag(FLAGS_directives);
  o.events_path = absl::GetFlag(FLAGS_events_log);
  o.comm_timeout = env.comm_timeout;
  o.host_address = env.host_address;
  std::unique_ptr<TrainerHooks> hooks;
  if (!o.directives_path.empty()) {
    absl::StatusOr<directives::DirectiveScript> script =
        directives::LoadDirectiveScript(o.directives_path);
    if (!script.ok()) {
      std::fprintf(stderr, "falcon_train rank %d: %s\n", env.rank,
                   std::string(script.status().message()).c_str());
      return kExitBadConfig;
    }
    hooks =
        std::make_unique<directives::ScriptedHooks>(*std::move(script), env.rank, o.events_path);
  } else {
    hooks = std::make_unique<NoopHooks>();
  }
  std::unique_ptr<falcon::trainer::directives::ShimTrainerHooks> shim_hooks;
  if (const std::string socket = AgentSocketTemplate(); !socket.empty()) {
    if (hooks != nullptr && !o.directives_path.empty()) {
      std::fprintf(stderr,
                   "falcon_train rank %d: --directives and --agent_socket exclude each "
                   "other\n",
                   env.rank);
      return kExitBadConfig;
    }
    falcon::trainer::directives::ShimTrainerHooksOptions so;
    so.job = absl::GetFlag(FLAGS_job);
    so.agent_socket = absl::StrReplaceAll(socket, {{"{node}", env.node}});
    so.node = env.node;
    so.rank = env.rank;
    so.local_rank = env.local_rank;
    so.world_size = env.world_size;
    so.dp_size = env.dp;
    so.pp_size = env.pp;
    so.global_micro_batches = o.trainer.micro_batches;
    // The model's pipeline shape for S2L: its blocks, and what moving one between stages moves.
    so.pipeline_blocks = o.trainer.model.num_blocks;
    so.block_state_bytes = static_cast<uint64_t>(model::BlockStateBytes(o.trainer.model));
    so.epoch = absl::GetFlag(FLAGS_epoch);
    absl::StatusOr<std::unique_ptr<falcon::trainer::directives::ShimTrainerHooks>> created =
        falcon::trainer::directives::ShimTrainerHooks::Create(std::move(so));
    if (!created.ok()) {
      std::fprintf(stderr, "falcon_train rank %d: %s\n", env.rank,
                   std::string(created.status().message()).c_str());
      return kExitBadConfig;
    }
    shim_hooks = *std::move(created);
    o.observer = shim_hooks.get();
  }
  ProgressHooks progress(shim_hooks != nullptr ? shim_hooks.get() : hooks.get(), env.rank,
                         env.rank == 0 ? absl::GetFlag(FLAGS_print_every) : 0);
  absl::StatusOr<RunResult> result = RunWorker(o, &progress);
  if (!result.ok()) {
    std::fprintf(stderr, "falcon_train rank %d: %s\n", env.rank,
                 std::string(result.status().message()).c_str());
    return absl::IsInvalidArgument(result.status()) ? kExitBadConfig : 1;
  }
  if (result->outcome == RunResult::Outcome::kCheckpointRestart) return kExitCheckpointRestart;
  if (env.rank == 0) {
    std::printf("done: %lld iterations, final loss %.4f\n",
                static_cast<long long>(result->iteration), result->last_loss);
  }
  return 0;
}

std::string SelfPath() {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return "";
  buf[n] = '\0';
  return buf;
}

int Fail(const std::string& message) {
  std::fprintf(stderr, "falcon_train: %s\n", message.c_str());
  return kExitBadConfig;
}

int RunLauncher(const std::vector<std::string>& args) {
  if (std::string bad = CheckFlags(); !bad.empty()) return Fail(bad);
  TrainerOptions t = TrainerOptionsFromFlags();
  const int nproc = absl::GetFlag(FLAGS_nproc) > 0 ? absl::GetFlag(FLAGS_nproc) : t.dp * t.pp;
  if (absl::Status s = directives::ValidateParallelConfig(nproc, t.dp, t.pp, t.micro_batches,
                                                          t.model.num_blocks);
      !s.ok()) {
    return Fail(std::string(s.message()));
  }
  absl::StatusOr<model::Corpus> corpus = model::Corpus::Load(absl::GetFlag(FLAGS_data));
  if (!corpus.ok()) return Fail(std::string(corpus.status().message()));
  t.model.vocab_size = corpus->vocab_size();
  if (absl::Status s = t.model.Validate(); !s.ok()) return Fail(std::string(s.message()));
  collective::fault::FaultPlan faults;
  if (!absl::GetFlag(FLAGS_faults).empty()) {
    absl::StatusOr<collective::fault::FaultPlan> f =
        collective::fault::LoadFaultSpec(absl::GetFlag(FLAGS_faults));
    if (!f.ok()) return Fail(absl::StrCat("--faults: ", f.status().message()));
    faults = *std::move(f);
  }
  for (const auto& [flag, path] :
       {std::pair<const char*, std::string>{"--json_log", t.json_log_path},
        std::pair<const char*, std::string>{"--events_log", absl::GetFlag(FLAGS_events_log)}}) {
    if (!path.empty() && !std::ofstream(path, std::ios::trunc)) {
      return Fail(absl::StrCat(flag, ": cannot write '", path, "'"));
    }
  }
  // SIGINT and SIGTERM stay blocked from before the control directory exists: RunLaunch takes
  // them from a signalfd (and unblocks them in each rank), so one that arrives before or between
  // launches still stops the run through the launcher and the directory is removed.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  sigprocmask(SIG_BLOCK, &stop_signals, nullptr);
  absl::StatusOr<std::unique_ptr<ControlDir>> control = ControlDir::Create();
  if (!control.ok()) return Fail(std::string(control.status().message()));
  const std::string restart_file = (*control)->restart_file();

  collective::launch::LaunchOptions launch;
  launch.nproc = nproc;
  launch.dp = t.dp;
  launch.pp = t.pp;
  launch.nodes = absl::GetFlag(FLAGS_nodes);
  launch.faults = faults.empty() ? "" : faults.ToString();
  launch.pin_cpus = absl::GetFlag(FLAGS_pin_cpus);
  launch.comm_timeout = absl::Milliseconds(absl::GetFlag(FLAGS_comm_timeout_ms));
  launch.rank_table_path = absl::GetFlag(FLAGS_rank_table);
  if (const std::string path = absl::GetFlag(FLAGS_cluster); !path.empty()) {
    absl::StatusOr<cluster::ClusterSpec> spec = cluster::ReadClusterSpec(path);
    if (!spec.ok()) return Fail(absl::StrCat("--cluster: ", spec.status().message()));
    launch.cluster = *std::move(spec);
    if (launch.nodes != static_cast<int>(launch.cluster->nodes.size())) {
      return Fail(absl::StrCat("--nodes=", launch.nodes, " but the cluster ", path, " has ",
                               launch.cluster->nodes.size(), " nodes"));
    }
  }
  std::vector<std::string> extra = {"--restart_file=" + restart_file};
  for (int restarts = 0;; ++restarts) {
    launch.command = {SelfPath()};
    launch.command.insert(launch.command.end(), args.begin() + 1, args.end());
    launch.command.insert(launch.command.end(), extra.begin(), extra.end());
    std::remove(restart_file.c_str());
    absl::StatusOr<collective::launch::LaunchResult> result = collective::launch::RunLaunch(launch);
    if (!result.ok()) return Fail(std::string(result.status().message()));
    if (result->exit_code != kExitCheckpointRestart) return result->exit_code;
    absl::StatusOr<RestartRequest> request = ReadRestartRequest(restart_file);
    if (!request.ok()) {
      std::fprintf(stderr, "falcon_train: ranks asked for a restart but left no request: %s\n",
                   std::string(request.status().message()).c_str());
      return result->exit_code;
    }
    if (restarts >= absl::GetFlag(FLAGS_max_restarts)) {
      std::fprintf(stderr, "falcon_train: giving up after %d restarts\n", restarts);
      return result->exit_code;
    }
    const std::vector<int>& excluded = request->excluded_ranks;
    absl::StatusOr<checkpoint::RestartPlan> plan = checkpoint::PlanRestart(
        launch.nproc, launch.pp, t.micro_batches, excluded, faults, launch.nodes);
    if (!plan.ok()) return Fail(absl::StrCat("S4 restart: ", plan.status().message()));
    std::fprintf(stderr,
                 "falcon_train: S4 restart from %s without ranks [%s]: DP=%d x PP=%d on %d "
                 "ranks (old ranks %s)\n",
                 request->checkpoint_dir.c_str(), absl::StrJoin(excluded, ",").c_str(), plan->dp,
                 plan->pp, plan->world, absl::StrJoin(plan->old_rank, ",").c_str());
    faults = plan->faults;
    if (launch.cluster.has_value()) {
      // Survivors stay on their nodes (their namespaces and agents); an excluded node is left out.
      std::vector<std::string> old_nodes = launch.rank_nodes;
      if (old_nodes.empty()) {
        for (int r = 0; r < launch.nproc; ++r) {
          old_nodes.push_back(absl::StrCat("node", r / (launch.nproc / launch.nodes)));
        }
      }
      launch.rank_nodes.clear();
      for (int old : plan->old_rank) launch.rank_nodes.push_back(old_nodes[old]);
      launch.nodes = static_cast<int>(
          std::set<std::string>(launch.rank_nodes.begin(), launch.rank_nodes.end()).size());
    } else {
      launch.nodes = plan->nodes;
    }
    launch.nproc = plan->world;
    launch.dp = plan->dp;
    ++launch.generation;
    launch.faults = faults.empty() ? "" : faults.ToString();
    extra = {"--restart_file=" + restart_file, "--resume=" + request->checkpoint_dir,
             absl::StrCat("--epoch=", request->epoch)};
  }
}

}  // namespace
}  // namespace falcon::trainer

int main(int argc, char** argv) {
  constexpr char kUsage[] =
      "falcon_train: the reference DP x PP trainer (launcher and rank processes).\n"
      "usage: falcon_train --dp D --pp P --micro-batches M --steps N [--layers L --hidden H "
      "--seed S --checkpoint-dir DIR --faults SPEC --directives FILE] --json-log FILE\n"
      "Flag names accept '-' or '_'. Exit status: 0 done, 2 bad flags or configuration, else a "
      "failing rank's code or 128 + signal.\n";
  absl::SetProgramUsageMessage(kUsage);
  if (falcon::cli::help::WantsHelp(argc, argv)) {  // Abseil's own --help exits 1.
    std::fputs(
        falcon::cli::help::FlagsHelp(absl::StrCat(kUsage, falcon::common::logging::kLoggingUsage),
                                     "train_main.cc", /*dashes=*/true)
            .c_str(),
        stdout);
    return 0;
  }
  // "--json-log=x" -> "--json_log=x"; --microbatches (the flag's old name) -> --micro_batches.
  const std::vector<std::string> args =
      falcon::cli::help::NormalizeFlagNames(argc, argv, {{"microbatches", "micro_batches"}});
  std::vector<std::string> storage = args;
  std::vector<char*> normalized;
  for (std::string& a : storage) normalized.push_back(a.data());
  const std::vector<char*> positional =
      absl::ParseCommandLine(static_cast<int>(normalized.size()), normalized.data());
  falcon::common::logging::InitLogging(argv[0]);
  if (absl::Status s = falcon::common::CheckNoPositionals(positional); !s.ok()) {
    return falcon::trainer::Fail(std::string(s.message()));
  }
  absl::StatusOr<falcon::collective::launch::RankEnv> env =
      falcon::collective::launch::RankEnvFromEnvironment();
  if (env.ok()) return falcon::trainer::RunRank(*env);
  if (!absl::IsFailedPrecondition(env.status())) {
    return falcon::trainer::Fail(std::string(env.status().message()));
  }
  return falcon::trainer::RunLauncher(args);
}
