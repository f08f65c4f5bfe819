#include "deploy/local/local_cluster.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"

namespace falcon::local {
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

}  // namespace

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

absl::StatusOr<pid_t> LocalCluster::Spawn(const std::string& name,
                                          const std::vector<std::string>& args,
                                          bool new_process_group) {
  // Everything the child needs is prepared before fork (the parent may have threads).
  const std::string log = log_path(name);
  std::vector<char*> argv;
  std::vector<std::string> storage = args;
  for (std::string& a : storage) argv.push_back(a.data());
  argv.push_back(nullptr);
  const int log_fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) return absl::InternalError(absl::StrCat("open '", log, "': ", strerror(errno)));
  const int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    close(log_fd);
    if (null_fd >= 0) close(null_fd);
    return absl::InternalError(absl::StrCat("fork for ", name, ": ", strerror(errno)));
  }
  if (pid == 0) {
    if (new_process_group) setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);  // The parent died before prctl.
    sigset_t all;
    sigemptyset(&all);
    sigprocmask(SIG_SETMASK, &all, nullptr);
    signal(SIGPIPE, SIG_DFL);
    if (null_fd >= 0) dup2(null_fd, 0);
    dup2(log_fd, 1);
    dup2(log_fd, 2);
    execv(argv[0], argv.data());
    const char msg[] = "exec failed\n";
    (void)!write(2, msg, sizeof(msg) - 1);
    _exit(127);
  }
  close(log_fd);
  if (null_fd >= 0) close(null_fd);
  return pid;
}

absl::StatusOr<std::vector<std::string>> LocalCluster::AwaitLines(
    const Child& child, const std::vector<std::string>& prefixes) {
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
    int status = 0;
    if (waitpid(child.pid, &status, WNOHANG) == child.pid) {
      return absl::InternalError(absl::StrCat(child.name, " exited before it was up (status ",
                                              status, "); log ", log, ":\n", Tail(text)));
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
  std::vector<std::string> args = {
      options_.controller_binary, absl::StrCat("--listen=127.0.0.1:", port),
      "--metrics_listen=127.0.0.1:0", absl::StrCat("--data_dir=", data_dir_)};
  args.insert(args.end(), options_.controller_args.begin(), options_.controller_args.end());
  controller_ = Child{"controller", -1, std::nullopt};
  // A marker, so the address lines of an earlier run in the same log are not taken.
  { std::ofstream(log_path("controller"), std::ios::trunc); }
  absl::StatusOr<pid_t> pid = Spawn("controller", args, /*new_process_group=*/true);
  if (!pid.ok()) return pid.status();
  controller_.pid = *pid;
  absl::StatusOr<std::vector<std::string>> lines =
      AwaitLines(controller_, {"listening on ", "metrics on "});
  if (!lines.ok()) {
    Reap(controller_);
    controller_.pid = -1;
    return lines.status();
  }
  controller_address_ = (*lines)[0];
  controller_metrics_ = (*lines)[1];
  return absl::OkStatus();
}

absl::Status LocalCluster::StartAgent(int node) {
  const std::string name = absl::StrCat("agent-node", node);
  std::vector<std::string> args = {options_.agent_binary,
                                   absl::StrCat("--controller=", controller_address_),
                                   absl::StrCat("--socket=", agent_socket(node)),
                                   absl::StrCat("--node=node", node),
                                   "--metrics_listen=127.0.0.1:0",
                                   "--backoff_max=1s",
                                   "--drain_timeout=2s"};
  args.insert(args.end(), options_.agent_args.begin(), options_.agent_args.end());
  absl::StatusOr<pid_t> pid = Spawn(name, args, /*new_process_group=*/true);
  if (!pid.ok()) return pid.status();
  agents_.push_back(Child{name, *pid, std::nullopt});
  absl::StatusOr<std::vector<std::string>> lines = AwaitLines(agents_.back(), {"metrics on "});
  if (!lines.ok()) return lines.status();
  agent_metrics_.push_back((*lines)[0]);
  return absl::OkStatus();
}

absl::Status LocalCluster::StartTrainer() {
  if (TrainerRunning()) return absl::FailedPreconditionError("the trainer is running");
  std::vector<std::string> args = {options_.trainer_binary,
                                   absl::StrCat("--dp=", options_.dp),
                                   absl::StrCat("--pp=", options_.pp),
                                   absl::StrCat("--nodes=", options_.nodes),
                                   absl::StrCat("--job=", options_.job),
                                   absl::StrCat("--agent_socket=", work_dir_, "/agent-{node}.sock"),
                                   absl::StrCat("--json_log=", trainer_json_log())};
  args.insert(args.end(), options_.trainer_args.begin(), options_.trainer_args.end());
  absl::StatusOr<pid_t> pid = Spawn("trainer", args, /*new_process_group=*/true);
  if (!pid.ok()) return pid.status();
  trainer_ = Child{"trainer", *pid, std::nullopt};
  return absl::OkStatus();
}

bool LocalCluster::Reap(Child& child) {
  if (child.exit_code.has_value()) return true;
  if (child.pid <= 0) return true;
  int status = 0;
  const pid_t r = waitpid(child.pid, &status, WNOHANG);
  if (r == child.pid) {
    child.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
    return true;
  }
  if (r < 0 && errno == ECHILD) {
    child.exit_code = -1;
    return true;
  }
  return false;
}

bool LocalCluster::TrainerRunning() { return trainer_.pid > 0 && !Reap(trainer_); }

std::optional<int> LocalCluster::TrainerExitCode() {
  if (trainer_.pid > 0) Reap(trainer_);
  return trainer_.exit_code;
}

absl::StatusOr<int> LocalCluster::WaitTrainer(absl::Duration timeout) {
  if (trainer_.pid <= 0) return absl::FailedPreconditionError("the trainer was not started");
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

void LocalCluster::StopChild(Child& child, bool kill_now) {
  if (child.pid <= 0 || Reap(child)) return;
  kill(child.pid, kill_now ? SIGKILL : SIGTERM);
  const absl::Time deadline = absl::Now() + options_.stop_grace;
  while (!Reap(child)) {
    if (absl::Now() > deadline) {
      kill(-child.pid, SIGKILL);  // Its process group (the launcher's is its own).
      kill(child.pid, SIGKILL);
      int status = 0;
      waitpid(child.pid, &status, 0);
      child.exit_code = -SIGKILL;
      return;
    }
    absl::SleepFor(absl::Milliseconds(10));
  }
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

void LocalCluster::Stop() {
  if (stopped_) return;
  stopped_ = true;
  StopChild(trainer_, false);
  for (Child& a : agents_) {
    if (a.pid > 0 && !Reap(a)) kill(a.pid, SIGTERM);  // In parallel; each drains briefly.
  }
  for (Child& a : agents_) StopChild(a, false);
  StopChild(controller_, false);
  if (own_work_dir_ && !work_dir_.empty()) {
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
    if (c.pid > 0 && !Reap(c)) out.push_back(c.pid);
  };
  add(controller_);
  for (Child& a : agents_) add(a);
  add(trainer_);
  return out;
}

std::vector<std::string> TunedTrainerArgs() {
  return {"--microbatches=32",
          "--layers=2",
          "--hidden=32",
          "--embed=16",
          "--batch=16",
          "--emulated_compute_ms=8",
          "--noburn_compute_faults",
          "--print_every=20"};
}

std::vector<std::string> TunedControllerArgs() {
  return {"--tick=100ms", "--validation_gemm_size=128", "--validation_repeats=5",
          "--validation_link_bytes=4194304"};
}

falcon::v1::Settings TunedSettings() {
  falcon::v1::Settings s;
  s.set_verification_min_ratio(0.2);
  return s;
}

std::unique_ptr<falcon::v1::Control::Stub> LocalCluster::NewControlStub() const {
  return falcon::v1::Control::NewStub(
      grpc::CreateChannel(controller_address_, grpc::InsecureChannelCredentials()));
}

}  // namespace falcon::local
