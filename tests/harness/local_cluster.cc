#include "tests/harness/local_cluster.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"

namespace falcon::tests::harness {
namespace {

constexpr char kWorkspace[] = "falcon";

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string Tail(const std::string& text, size_t n = 2000) {
  return text.size() <= n ? text : "..." + text.substr(text.size() - n);
}

bool IsExecutable(const std::string& path) { return access(path.c_str(), X_OK) == 0; }

std::string SelfExe() {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return "";
  buf[n] = '\0';
  return buf;
}

int PortOf(const std::string& address) {
  int port = 0;
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos || !absl::SimpleAtoi(address.substr(colon + 1), &port)) return 0;
  return port;
}

// kFailedPrecondition unless `openssl version` runs (the PKI script needs openssl in PATH).
absl::Status CheckOpenssl() {
  common::SpawnOptions options;
  options.argv = {"openssl", "version"};
  options.search_path = true;
  options.stdin_stream = common::Stdio::Null();
  options.stdout_stream = common::Stdio::Null();
  options.stderr_stream = common::Stdio::Null();
  absl::StatusOr<common::Subprocess> proc = common::Subprocess::Spawn(options);
  absl::StatusOr<common::ExitStatus> ended =
      proc.ok() ? proc->Wait() : absl::StatusOr<common::ExitStatus>(proc.status());
  if (ended.ok() && ended->success()) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("tls: openssl is needed by deploy/pki/falcon-pki.sh but `openssl version` ",
                   ended.ok() ? ended->ToString() : std::string(ended.status().message()),
                   " (Debian: apt-get install openssl)"));
}

}  // namespace

std::vector<std::string> LinesWith(const std::string& path, const std::string& needle) {
  std::ifstream in(path);
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) {
    if (line.find(needle) != std::string::npos) out.push_back(line);
  }
  return out;
}

absl::StatusOr<std::string> FindRunfile(const std::string& path) {
  std::vector<std::string> candidates;
  const char* workspace = std::getenv("TEST_WORKSPACE");
  const std::string ws = workspace != nullptr && *workspace != '\0' ? workspace : kWorkspace;
  for (const char* var : {"TEST_SRCDIR", "RUNFILES_DIR"}) {
    const char* dir = std::getenv(var);
    if (dir != nullptr && *dir != '\0') candidates.push_back(absl::StrCat(dir, "/", ws, "/", path));
  }
  const std::string self = SelfExe();
  if (!self.empty()) {
    candidates.push_back(absl::StrCat(self, ".runfiles/", ws, "/", path));
    // A binary run from bazel-bin: its siblings are built there too.
    std::filesystem::path dir = std::filesystem::path(self).parent_path();
    for (int up = 0; up < 6 && !dir.empty() && dir != dir.root_path(); ++up) {
      candidates.push_back((dir / path).string());
      dir = dir.parent_path();
    }
  }
  for (const std::string& c : candidates) {
    if (IsExecutable(c)) return c;
  }
  return absl::NotFoundError(absl::StrCat("runfile '", path, "' not found (looked in ",
                                          absl::StrJoin(candidates, ", "),
                                          "); add it to the data deps or pass its path"));
}

absl::StatusOr<std::unique_ptr<LocalCluster>> LocalCluster::Start(LocalClusterOptions options) {
  if (options.dp < 1 || options.pp < 1) {
    return absl::InvalidArgumentError("dp, pp: must be >= 1");
  }
  if (options.nodes < 1 || (options.dp * options.pp) % options.nodes != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("nodes: ", options.nodes, " must divide dp x pp = ", options.dp * options.pp));
  }
  struct Binary {
    std::string* path;
    const char* runfile;
  };
  for (Binary b : {Binary{&options.controller_binary, "controller/falcon_controller"},
                   Binary{&options.agent_binary, "agent/falcon_agent"},
                   Binary{&options.trainer_binary, "trainer/falcon_train"}}) {
    if (b.path->empty()) {
      absl::StatusOr<std::string> found = FindRunfile(b.runfile);
      if (!found.ok()) return found.status();
      *b.path = *found;
    } else if (!IsExecutable(*b.path)) {
      return absl::NotFoundError(absl::StrCat("'", *b.path, "' is not an executable"));
    }
  }
  if (options.tls) {
    if (options.pki_script.empty()) {
      absl::StatusOr<std::string> found = FindRunfile("deploy/pki/falcon-pki.sh");
      if (!found.ok()) {
        return absl::NotFoundError(
            absl::StrCat("tls: the PKI script deploy/pki/falcon-pki.sh is missing (add "
                         "//deploy/pki:falcon-pki.sh to the data deps or set pki_script): ",
                         found.status().message()));
      }
      options.pki_script = *found;
    } else if (!IsExecutable(options.pki_script)) {
      return absl::NotFoundError(
          absl::StrCat("pki_script: '", options.pki_script, "' is not an executable"));
    }
    if (absl::Status s = CheckOpenssl(); !s.ok()) return s;
  }
  std::unique_ptr<LocalCluster> cluster(new LocalCluster(std::move(options)));
  if (absl::Status s = cluster->StartAll(); !s.ok()) {
    cluster->Stop();
    return s;
  }
  return cluster;
}

absl::Status LocalCluster::StartAll() {
  if (options_.work_dir.empty()) {
    // Short, so unix socket paths stay below 108 bytes.
    char tmpl[] = "/tmp/falcon-lc.XXXXXX";
    if (mkdtemp(tmpl) == nullptr) {
      return absl::InternalError(absl::StrCat("mkdtemp /tmp/falcon-lc.XXXXXX: ", strerror(errno)));
    }
    work_dir_ = tmpl;
    own_work_dir_ = !options_.keep_work_dir;
  } else {
    work_dir_ = options_.work_dir;
    std::error_code ec;
    std::filesystem::create_directories(work_dir_, ec);
    if (ec) return absl::InternalError(absl::StrCat("work_dir '", work_dir_, "': ", ec.message()));
  }
  if (agent_socket(options_.nodes - 1).size() >= 108) {
    return absl::InvalidArgumentError(
        absl::StrCat("work_dir '", work_dir_, "': too long for unix socket paths"));
  }
  data_dir_ = options_.data_dir.empty() ? work_dir_ + "/controller-data" : options_.data_dir;
  if (options_.make_netns) {
    if (absl::Status s = cluster::CheckNetnsSupport(); !s.ok()) return s;
    // Leftovers of runs that were killed before their Stop (their creators are gone).
    if (absl::StatusOr<cluster::NetnsCleanupReport> r = cluster::CleanupStaleNetns(); !r.ok()) {
      std::cerr << "local_cluster: cleaning stale netns clusters: " << r.status() << "\n";
    }
    cluster::NetnsOptions netns;
    netns.nodes = cluster::DefaultNodeNames(options_.nodes);
    absl::StatusOr<std::unique_ptr<cluster::NetnsCluster>> made =
        cluster::NetnsCluster::Create(netns);
    if (!made.ok()) return made.status();
    netns_ = *std::move(made);
    cluster_spec_ = netns_->spec();
  } else if (options_.cluster.has_value()) {
    cluster_spec_ = *options_.cluster;
  } else {
    cluster_spec_.kind = cluster::ClusterKind::kLoopback;
    cluster_spec_.controller_address = "127.0.0.1";
    for (int n = 0; n < options_.nodes; ++n) {
      cluster_spec_.nodes.push_back({absl::StrCat("node", n), "", "127.0.0.1", "", ""});
    }
  }
  for (int n = 0; n < options_.nodes; ++n) {
    if (absl::Status s = cluster_spec_.Node(absl::StrCat("node", n)).status(); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("cluster: ", s.message()));
    }
  }
  if (absl::Status s = cluster::WriteClusterSpec(cluster_spec_path(), cluster_spec_); !s.ok()) {
    return s;
  }
  if (options_.tls) {
    if (absl::Status s = MakePki(); !s.ok()) return s;
  }
  if (absl::Status s = StartController(0); !s.ok()) return s;
  for (int n = 0; n < options_.nodes; ++n) {
    if (absl::Status s = StartAgent(n); !s.ok()) return s;
  }
  if (options_.start_trainer) return StartTrainer();
  return absl::OkStatus();
}

LocalCluster::~LocalCluster() { Stop(); }

std::string LocalCluster::agent_socket(int node) const {
  return absl::StrCat(work_dir_, "/agent-node", node, ".sock");
}

std::string LocalCluster::log_path(const std::string& name) const {
  return absl::StrCat(work_dir_, "/", name, ".log");
}

absl::StatusOr<common::Subprocess> LocalCluster::Spawn(const std::string& name,
                                                       const std::vector<std::string>& args,
                                                       bool new_process_group) {
  common::SpawnOptions options;
  options.argv = args;
  options.name = name;
  options.new_process_group = new_process_group;
  options.parent_death_signal = SIGKILL;
  options.stdin_stream = common::Stdio::Null();
  options.stdout_stream = common::Stdio::File(log_path(name), /*append=*/true);
  options.stderr_stream = common::Stdio::SameAsStdout();
  return common::Subprocess::Spawn(options);
}

absl::StatusOr<std::vector<std::string>> LocalCluster::AwaitLines(
    Child& child, const std::vector<std::string>& prefixes) {
  const std::string log = log_path(child.name);
  const absl::Time deadline = absl::Now() + options_.start_timeout;
  for (;;) {
    const std::string text = ReadFile(log);
    std::vector<std::string> found(prefixes.size());
    size_t have = 0;
    std::istringstream lines(text);
    std::string line;
    while (std::getline(lines, line)) {
      for (size_t i = 0; i < prefixes.size(); ++i) {
        if (found[i].empty() && absl::StartsWith(line, prefixes[i])) {
          found[i] = line.substr(prefixes[i].size());
          if (!found[i].empty()) ++have;
        }
      }
    }
    if (have == prefixes.size()) return found;
    if (child.proc.has_value()) {
      absl::StatusOr<std::optional<common::ExitStatus>> ended = child.proc->Poll();
      if (!ended.ok()) return ended.status();
      if (ended->has_value()) {
        return absl::InternalError(absl::StrCat(child.name, " ", (*ended)->ToString(),
                                                " before it was up; log ", log, ":\n", Tail(text)));
      }
    }
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(absl::StrCat(child.name, " not up after ",
                                                      absl::FormatDuration(options_.start_timeout),
                                                      "; log ", log, ":\n", Tail(text)));
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
}

absl::Status LocalCluster::StartController(int port) {
  const std::string& host = cluster_spec_.controller_address;
  std::vector<std::string> args = {
      options_.controller_binary, absl::StrCat("--listen=", host, ":", port),
      absl::StrCat("--metrics_listen=", host, ":0"), absl::StrCat("--data_dir=", data_dir_)};
  if (options_.tls) {
    const proto::TlsFiles tls = tls_files("controller");
    args.insert(args.end(),
                {absl::StrCat("--tls_cert=", tls.cert), absl::StrCat("--tls_key=", tls.key),
                 absl::StrCat("--tls_ca=", tls.ca)});
  } else {
    args.push_back("--plaintext");
  }
  args.insert(args.end(), options_.controller_args.begin(), options_.controller_args.end());
  controller_ = Child{"controller", std::nullopt, std::nullopt};
  // A fresh log, so the address lines of an earlier run are not taken; the old one is kept.
  if (absl::Status s = SetAsideLog("controller"); !s.ok()) return s;
  absl::StatusOr<common::Subprocess> proc = Spawn("controller", args, /*new_process_group=*/true);
  if (!proc.ok()) return proc.status();
  controller_.proc = std::move(*proc);
  absl::StatusOr<std::vector<std::string>> lines =
      AwaitLines(controller_, {"listening on ", "metrics on "});
  if (!lines.ok()) {
    controller_.proc.reset();  // Killed (if still running) and reaped.
    return lines.status();
  }
  controller_address_ = (*lines)[0];
  controller_metrics_ = (*lines)[1];
  return absl::OkStatus();
}

absl::Status LocalCluster::StartAgent(int node) {
  const std::string name = absl::StrCat("agent-node", node);
  absl::StatusOr<const cluster::NodeSpec*> spec = cluster_spec_.Node(absl::StrCat("node", node));
  if (!spec.ok()) return spec.status();
  std::vector<std::string> args = {options_.agent_binary,
                                   absl::StrCat("--controller=", controller_address_),
                                   absl::StrCat("--socket=", agent_socket(node)),
                                   absl::StrCat("--node=node", node),
                                   absl::StrCat("--metrics_listen=", (*spec)->address, ":0"),
                                   "--backoff_max=1s",
                                   "--drain_timeout=2s"};
  if (options_.tls) {
    const proto::TlsFiles tls = tls_files(absl::StrCat("node", node));
    args.insert(args.end(),
                {absl::StrCat("--tls_cert=", tls.cert), absl::StrCat("--tls_key=", tls.key),
                 absl::StrCat("--tls_ca=", tls.ca)});
  } else {
    args.push_back("--plaintext=true");
  }
  args.insert(args.end(), options_.agent_args.begin(), options_.agent_args.end());
  absl::StatusOr<common::Subprocess> proc =
      Spawn(name, cluster::CommandInNode(**spec, args), /*new_process_group=*/true);
  if (!proc.ok()) return proc.status();
  const size_t index = static_cast<size_t>(node);
  if (index == agents_.size()) {
    agents_.push_back(Child{name, std::nullopt, std::nullopt});
    agent_metrics_.emplace_back();
  }
  agents_[index] = Child{name, std::move(*proc), std::nullopt};
  absl::StatusOr<std::vector<std::string>> lines = AwaitLines(agents_[index], {"metrics on "});
  if (!lines.ok()) return lines.status();
  agent_metrics_[index] = (*lines)[0];
  return absl::OkStatus();
}

absl::Status LocalCluster::RestartAgent(int node, bool kill_now) {
  if (node < 0 || static_cast<size_t>(node) >= agents_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("node: ", node, " is not an agent of the cluster"));
  }
  StopChild(agents_[node], kill_now);
  // A fresh log, so the address line of the stopped agent is not taken; the old one is kept.
  if (absl::Status s = SetAsideLog(absl::StrCat("agent-node", node)); !s.ok()) return s;
  return StartAgent(node);
}

absl::Status LocalCluster::SetAsideLog(const std::string& name) const {
  const std::string log = log_path(name);
  if (!std::filesystem::exists(log)) return absl::OkStatus();
  for (int n = 1;; ++n) {
    const std::string to = absl::StrCat(log, ".", n);
    if (std::filesystem::exists(to)) continue;
    std::error_code ec;
    std::filesystem::rename(log, to, ec);
    if (ec) return absl::InternalError(absl::StrCat("rename '", log, "': ", ec.message()));
    return absl::OkStatus();
  }
}

absl::Status LocalCluster::StartTrainer() {
  if (TrainerRunning()) return absl::FailedPreconditionError("the trainer is running");
  std::vector<std::string> args = {options_.trainer_binary,
                                   absl::StrCat("--dp=", options_.dp),
                                   absl::StrCat("--pp=", options_.pp),
                                   absl::StrCat("--nodes=", options_.nodes),
                                   absl::StrCat("--job=", options_.job),
                                   absl::StrCat("--agent_socket=", work_dir_, "/agent-{node}.sock"),
                                   absl::StrCat("--json_log=", trainer_json_log()),
                                   absl::StrCat("--rank_table=", rank_table_path()),
                                   absl::StrCat("--checkpoint_dir=", checkpoint_dir())};
  if (cluster_spec_.kind == cluster::ClusterKind::kNetns) {
    args.push_back(absl::StrCat("--cluster=", cluster_spec_path()));
  }
  args.insert(args.end(), options_.trainer_args.begin(), options_.trainer_args.end());
  absl::StatusOr<common::Subprocess> proc = Spawn("trainer", args, /*new_process_group=*/true);
  if (!proc.ok()) return proc.status();
  trainer_ = Child{"trainer", std::move(*proc), std::nullopt};
  return absl::OkStatus();
}

bool LocalCluster::Reap(Child& child) {
  if (child.exit_code.has_value()) return true;
  if (!child.proc.has_value()) return true;
  absl::StatusOr<std::optional<common::ExitStatus>> ended = child.proc->Poll();
  if (!ended.ok()) {  // Reaped elsewhere: it is gone, how is unknown.
    std::cerr << "local_cluster: " << ended.status() << "\n";
    child.exit_code = -1;
    return true;
  }
  if (!ended->has_value()) return false;
  child.exit_code = (*ended)->exited() ? (*ended)->code() : -(*ended)->signal();
  return true;
}

bool LocalCluster::TrainerRunning() { return trainer_.proc.has_value() && !Reap(trainer_); }

std::optional<int> LocalCluster::TrainerExitCode() {
  if (trainer_.proc.has_value()) Reap(trainer_);
  return trainer_.exit_code;
}

absl::StatusOr<int> LocalCluster::WaitTrainer(absl::Duration timeout) {
  if (!trainer_.proc.has_value()) {
    return absl::FailedPreconditionError("the trainer was not started");
  }
  const absl::Time deadline = absl::Now() + timeout;
  while (!Reap(trainer_)) {
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("trainer still running after ", absl::FormatDuration(timeout)));
    }
    absl::SleepFor(absl::Milliseconds(50));
  }
  return *trainer_.exit_code;
}

// SIGTERM (or SIGKILL when `kill_now`) to the child and its process group (the launcher's is its
// own), SIGKILL to both after the grace.
void LocalCluster::StopChild(Child& child, bool kill_now) {
  if (!child.proc.has_value() || Reap(child)) return;
  absl::StatusOr<common::ExitStatus> ended =
      child.proc->Stop(kill_now ? SIGKILL : SIGTERM, options_.stop_grace);
  if (!ended.ok()) {
    std::cerr << "local_cluster: stopping " << child.name << ": " << ended.status() << "\n";
    child.exit_code = -1;
    return;
  }
  child.exit_code = ended->exited() ? ended->code() : -ended->signal();
}

void LocalCluster::StopTrainer() { StopChild(trainer_, false); }

absl::Status LocalCluster::RestartController(bool kill_now) {
  const int port = PortOf(controller_address_);
  StopChild(controller_, kill_now);
  absl::Status s = StartController(port);
  if (!s.ok() && port != 0) {
    // The port may be taken (or in TIME_WAIT without SO_REUSEADDR): take any.
    s = StartController(0);
  }
  return s;
}

void LocalCluster::KeepLogs() const {
  const char* outputs = std::getenv("TEST_UNDECLARED_OUTPUTS_DIR");
  if (outputs == nullptr) return;
  // One folder per cluster of the test: the work dir's own (unique) name.
  const std::string to =
      absl::StrCat(outputs, "/cluster-logs/", std::filesystem::path(work_dir_).filename().string());
  std::error_code ec;
  std::filesystem::create_directories(to, ec);
  if (ec) {
    std::cerr << "local_cluster: keeping logs in '" << to << "': " << ec.message() << "\n";
    return;
  }
  for (const auto& entry : std::filesystem::directory_iterator(work_dir_, ec)) {
    const std::string name = entry.path().filename().string();
    if (!absl::StrContains(name, ".log")) continue;
    std::filesystem::copy_file(entry.path(), to + "/" + name,
                               std::filesystem::copy_options::overwrite_existing, ec);
    if (ec) std::cerr << "local_cluster: keeping '" << name << "': " << ec.message() << "\n";
  }
}

void LocalCluster::Stop() {
  if (stopped_) return;
  stopped_ = true;
  StopChild(trainer_, false);
  for (Child& a : agents_) {
    if (!a.proc.has_value() || Reap(a)) continue;
    // In parallel; each drains briefly. StopChild below escalates whatever this did not reach.
    if (absl::Status s = a.proc->Signal(SIGTERM); !s.ok())
      std::cerr << "local_cluster: " << s << "\n";
  }
  for (Child& a : agents_) StopChild(a, false);
  StopChild(controller_, false);
  if (netns_ != nullptr) {
    // Logged and counted by Destroy; the cluster's lock lets a later run clean what remains.
    if (absl::Status s = netns_->Destroy(); !s.ok()) std::cerr << "local_cluster: " << s << "\n";
    netns_.reset();
  }
  if (own_work_dir_ && !work_dir_.empty()) {
    KeepLogs();
    std::error_code ec;
    std::filesystem::remove_all(work_dir_, ec);
  }
}

absl::Status LocalCluster::SetSettings(const falcon::v1::Settings& settings) {
  auto stub = NewControlStub();
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  falcon::v1::SetSettingsRequest req;
  *req.mutable_settings() = settings;
  falcon::v1::Settings out;
  grpc::Status s = stub->SetSettings(&ctx, req, &out);
  if (!s.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                        absl::StrCat("SetSettings: ", s.error_message()));
  }
  return absl::OkStatus();
}

std::vector<pid_t> LocalCluster::pids() {
  std::vector<pid_t> out;
  auto add = [&](Child& c) {
    if (c.proc.has_value() && !Reap(c)) out.push_back(c.proc->pid());
  };
  add(controller_);
  for (Child& a : agents_) add(a);
  add(trainer_);
  return out;
}

std::vector<std::string> TunedControllerArgs() {
  return {"--tick=100ms", "--validation_gemm_size=128", "--validation_repeats=5",
          "--validation_link_bytes=4194304"};
}

falcon::v1::Settings TunedSettings() {
  falcon::v1::Settings s;
  s.set_verification_min_ratio(0.10);  // docs/algorithms.md#environment-shifts
  return s;
}

std::unique_ptr<falcon::v1::Control::Stub> LocalCluster::NewControlStub() const {
  return falcon::v1::Control::NewStub(grpc::CreateChannel(
      controller_address_,
      control_credentials_ != nullptr ? control_credentials_ : grpc::InsecureChannelCredentials()));
}

proto::TlsFiles LocalCluster::tls_files(const std::string& name) const {
  if (pki_dir_.empty()) return {};
  return proto::TlsFiles{absl::StrCat(pki_dir_, "/", name, ".pem"),
                         absl::StrCat(pki_dir_, "/", name, ".key"), pki_dir_ + "/ca.pem"};
}

absl::Status LocalCluster::RunPki(const std::vector<std::string>& args) {
  const std::string log = log_path("pki");
  std::vector<std::string> argv = {options_.pki_script, pki_dir_};
  argv.insert(argv.end(), args.begin(), args.end());
  const std::string command = absl::StrJoin(argv, " ");
  // Only this run's output goes into an error.
  const size_t before = ReadFile(log).size();
  common::SpawnOptions options;
  options.argv = argv;
  options.name = "falcon-pki.sh";
  options.parent_death_signal = SIGKILL;
  options.stdin_stream = common::Stdio::Null();
  options.stdout_stream = common::Stdio::File(log, /*append=*/true);
  options.stderr_stream = common::Stdio::SameAsStdout();
  absl::StatusOr<common::Subprocess> proc = common::Subprocess::Spawn(options);
  if (!proc.ok()) return proc.status();
  absl::StatusOr<common::ExitStatus> ended = proc->Wait();
  if (!ended.ok()) return ended.status();
  if (ended->success()) return absl::OkStatus();
  const std::string output = ReadFile(log);
  return absl::InternalError(absl::StrCat("tls: `", command, "` ", ended->ToString(), ": ",
                                          Tail(output.substr(std::min(before, output.size())))));
}

absl::Status LocalCluster::MakePki() {
  pki_dir_ = work_dir_ + "/pki";
  auto missing = [&](const std::string& name) {
    const proto::TlsFiles f = tls_files(name);
    return !std::filesystem::exists(f.cert) || !std::filesystem::exists(f.key);
  };
  struct Certificate {
    std::string name;
    std::vector<std::string> args;
  };
  std::vector<Certificate> wanted = {
      {"ca", {"ca"}},
      {"controller",
       {"controller", "controller", absl::StrCat("IP:", cluster_spec_.controller_address)}},
      {kTlsOperator, {"client", kTlsOperator, "operator"}}};
  for (int n = 0; n < options_.nodes; ++n) {
    const std::string node = absl::StrCat("node", n);
    wanted.push_back({node, {"node", node}});
  }
  for (const Certificate& c : wanted) {
    if (!missing(c.name)) continue;
    if (absl::Status s = RunPki(c.args); !s.ok()) return s;
  }
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
      proto::MakeChannelCredentials(tls_files(kTlsOperator));
  if (!credentials.ok()) return credentials.status();
  control_credentials_ = *credentials;
  return absl::OkStatus();
}

absl::StatusOr<proto::TlsFiles> LocalCluster::MakeClientCertificate(const std::string& name,
                                                                    const std::string& role) {
  if (!options_.tls) {
    return absl::FailedPreconditionError("MakeClientCertificate: the cluster runs without tls");
  }
  if (absl::Status s = RunPki({"client", name, role}); !s.ok()) return s;
  return tls_files(name);
}

}  // namespace falcon::tests::harness
