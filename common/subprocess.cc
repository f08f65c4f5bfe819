#include "common/subprocess.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

extern char** environ;

namespace falcon::common {
namespace {

// What the child reports through the close-on-exec pipe when a step before exec fails.
enum Stage : int { kAffinity = 1, kStdio, kChdir, kExec };

struct Report {
  int stage;
  int error;
};

void CloseFd(int& fd) {
  if (fd >= 0) close(fd);
  fd = -1;
}

// Moves `fd` to a number >= 3 (close-on-exec) so that dup2 onto 0..2 in the child cannot clobber
// another stream's source.
int AboveStdio(int fd) {
  if (fd < 0 || fd > 2) return fd;
  const int moved = fcntl(fd, F_DUPFD_CLOEXEC, 3);
  close(fd);
  return moved;
}

// [[noreturn]] in the child: report and exit 127. Async-signal-safe.
[[noreturn]] void Fail(int report_fd, Stage stage) {
  const Report r{stage, errno};
  (void)!write(report_fd, &r, sizeof(r));
  _exit(127);
}

}  // namespace

ExitStatus ExitStatus::FromWaitStatus(int status) {
  if (WIFSIGNALED(status)) return Signaled(WTERMSIG(status));
  return Exited(WEXITSTATUS(status));
}

std::string ExitStatus::ToString() const {
  if (exited()) return absl::StrCat("exited with code ", code_);
  const char* what = sigdescr_np(signal_);
  return absl::StrCat("killed by signal ", signal_, " (", what != nullptr ? what : "unknown", ")");
}

absl::StatusOr<Subprocess> Subprocess::Spawn(const SpawnOptions& options) {
  return Start(options, nullptr);
}

absl::StatusOr<Subprocess> Subprocess::SpawnFunction(const SpawnOptions& options,
                                                     absl::FunctionRef<int()> fn) {
  if (!options.argv.empty() || options.env.has_value() || options.search_path) {
    return absl::InvalidArgumentError(absl::StrCat("SpawnFunction '", options.name,
                                                   "': argv, env and search_path are for Spawn"));
  }
  return Start(options, &fn);
}

absl::StatusOr<Subprocess> Subprocess::Start(const SpawnOptions& options,
                                             const absl::FunctionRef<int()>* fn) {
  const std::string name =
      !options.name.empty() ? options.name : (options.argv.empty() ? "" : options.argv[0]);
  if (fn == nullptr && (options.argv.empty() || options.argv[0].empty())) {
    return absl::InvalidArgumentError("spawn: empty argv (no program)");
  }
  if (name.empty()) return absl::InvalidArgumentError("spawn: a function child needs a name");
  for (int cpu : options.cpus) {
    if (cpu < 0 || cpu >= CPU_SETSIZE) {
      return absl::InvalidArgumentError(absl::StrCat("spawn '", name, "': bad CPU ", cpu));
    }
  }
  if (options.stdin_stream.kind == Stdio::Kind::kSameAsStdout ||
      options.stdout_stream.kind == Stdio::Kind::kSameAsStdout) {
    return absl::InvalidArgumentError(
        absl::StrCat("spawn '", name, "': SameAsStdout is for stderr only"));
  }

  // Everything the child needs, prepared before fork.
  Subprocess p;
  p.name_ = name;
  p.group_ = options.new_process_group;
  int child_fd[3] = {-1, -1, -1};  // Sources for the child's 0, 1, 2 (-1: leave).
  bool stderr_to_stdout = false;
  auto cleanup = [&] {
    for (int& fd : child_fd) CloseFd(fd);
    p.CloseFds();
  };
  const Stdio* streams[3] = {&options.stdin_stream, &options.stdout_stream, &options.stderr_stream};
  static constexpr const char* kStreamNames[3] = {"stdin", "stdout", "stderr"};
  for (int i = 0; i < 3; ++i) {
    const Stdio& s = *streams[i];
    switch (s.kind) {
      case Stdio::Kind::kInherit:
        break;
      case Stdio::Kind::kSameAsStdout:
        stderr_to_stdout = true;
        break;
      case Stdio::Kind::kNull:
      case Stdio::Kind::kFile: {
        if (s.kind == Stdio::Kind::kFile && s.path.empty()) {
          cleanup();
          return absl::InvalidArgumentError(
              absl::StrCat("spawn '", name, "': ", kStreamNames[i], " file without a path"));
        }
        const std::string path = s.kind == Stdio::Kind::kNull ? "/dev/null" : s.path;
        const int flags =
            i == 0 ? O_RDONLY : (O_WRONLY | O_CREAT | (s.append ? O_APPEND : O_TRUNC));
        const int fd = AboveStdio(open(path.c_str(), flags | O_CLOEXEC, 0644));
        if (fd < 0) {
          const int err = errno;
          cleanup();
          return absl::ErrnoToStatus(err, absl::StrCat("cannot open '", path, "' for ",
                                                       kStreamNames[i], " of '", name, "'"));
        }
        child_fd[i] = fd;
        break;
      }
      case Stdio::Kind::kPipe: {
        int fds[2];
        if (pipe2(fds, O_CLOEXEC) != 0) {
          const int err = errno;
          cleanup();
          return absl::ErrnoToStatus(
              err, absl::StrCat("cannot make a ", kStreamNames[i], " pipe for '", name, "'"));
        }
        const int child_end = AboveStdio(i == 0 ? fds[0] : fds[1]);
        const int our_end = AboveStdio(i == 0 ? fds[1] : fds[0]);
        child_fd[i] = child_end;
        (i == 0 ? p.stdin_fd_ : i == 1 ? p.stdout_fd_ : p.stderr_fd_) = our_end;
        if (child_end < 0 || our_end < 0) {
          cleanup();
          return absl::InternalError(absl::StrCat("cannot place a pipe for '", name, "'"));
        }
        break;
      }
    }
  }
  std::vector<std::string> argv_storage = options.argv;
  std::vector<char*> argv;
  for (std::string& a : argv_storage) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_storage;
  std::vector<char*> envp;
  char** env = environ;
  if (options.env.has_value()) {
    env_storage = *options.env;
    for (std::string& e : env_storage) envp.push_back(e.data());
    envp.push_back(nullptr);
    env = envp.data();
  }
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  for (int cpu : options.cpus) CPU_SET(cpu, &cpus);
  int report[2];
  if (pipe2(report, O_CLOEXEC) != 0) {
    const int err = errno;
    cleanup();
    return absl::ErrnoToStatus(err, absl::StrCat("cannot make a pipe to spawn '", name, "'"));
  }
  report[1] = AboveStdio(report[1]);
  const pid_t parent = getpid();

  const pid_t pid = fork();
  if (pid < 0) {
    const int err = errno;
    CloseFd(report[0]);
    CloseFd(report[1]);
    cleanup();
    return absl::ErrnoToStatus(err, absl::StrCat("cannot fork for '", name, "'"));
  }
  if (pid == 0) {
    // The child: async-signal-safe calls only.
    close(report[0]);
    if (options.new_process_group) setpgid(0, 0);
    if (options.parent_death_signal != 0) {
      prctl(PR_SET_PDEATHSIG, options.parent_death_signal);
      if (getppid() != parent) _exit(127);  // The parent died before the signal was armed.
    }
    if (!options.cpus.empty() && sched_setaffinity(0, sizeof(cpus), &cpus) != 0) {
      Fail(report[1], kAffinity);
    }
    for (int i = 0; i < 3; ++i) {
      if (child_fd[i] >= 0 && dup2(child_fd[i], i) < 0) Fail(report[1], kStdio);
    }
    if (stderr_to_stdout && dup2(1, 2) < 0) Fail(report[1], kStdio);
    if (!options.cwd.empty() && chdir(options.cwd.c_str()) != 0) Fail(report[1], kChdir);
    if (fn != nullptr) {
      close(report[1]);
      _exit((*fn)());
    }
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    signal(SIGPIPE, SIG_DFL);
    if (options.search_path) {
      execvpe(argv[0], argv.data(), env);
    } else {
      execve(argv[0], argv.data(), env);
    }
    Fail(report[1], kExec);
  }

  // The parent.
  p.pid_ = pid;
  close(report[1]);
  for (int& fd : child_fd) CloseFd(fd);
  Report r{};
  ssize_t got;
  do {
    got = read(report[0], &r, sizeof(r));
  } while (got < 0 && errno == EINTR);
  close(report[0]);
  if (got == sizeof(r)) {
    p.ReapBlocking();  // It exits 127 right away; `r` says why.
    p.CloseFds();
    const char* program = options.argv.empty() ? name.c_str() : options.argv[0].c_str();
    switch (r.stage) {
      case kAffinity:
        return absl::ErrnoToStatus(r.error,
                                   absl::StrCat("cannot set the CPU affinity of '", name, "'"));
      case kStdio:
        return absl::ErrnoToStatus(
            r.error, absl::StrCat("cannot set up stdin/stdout/stderr of '", name, "'"));
      case kChdir:
        return absl::ErrnoToStatus(
            r.error, absl::StrCat("cannot enter '", options.cwd, "' for '", name, "'"));
      default:
        return absl::ErrnoToStatus(r.error, absl::StrCat("cannot execute '", program, "'"));
    }
  }
  return p;
}

Subprocess::Subprocess(Subprocess&& other) noexcept { *this = std::move(other); }

Subprocess& Subprocess::operator=(Subprocess&& other) noexcept {
  if (this != &other) {
    KillAndReap();
    CloseFds();
    pid_ = std::exchange(other.pid_, -1);
    name_ = std::move(other.name_);
    group_ = other.group_;
    exit_ = std::exchange(other.exit_, std::nullopt);
    stdin_fd_ = std::exchange(other.stdin_fd_, -1);
    stdout_fd_ = std::exchange(other.stdout_fd_, -1);
    stderr_fd_ = std::exchange(other.stderr_fd_, -1);
  }
  return *this;
}

Subprocess::~Subprocess() {
  KillAndReap();
  CloseFds();
}

void Subprocess::CloseFds() {
  CloseFd(stdin_fd_);
  CloseFd(stdout_fd_);
  CloseFd(stderr_fd_);
}

void Subprocess::CloseStdin() { CloseFd(stdin_fd_); }

void Subprocess::KillAndReap() {
  if (pid_ <= 0 || exit_.has_value()) return;
  if (group_) kill(-pid_, SIGKILL);
  kill(pid_, SIGKILL);
  ReapBlocking();
}

void Subprocess::ReapBlocking() {
  if (pid_ <= 0 || exit_.has_value()) return;
  int status = 0;
  pid_t r;
  do {
    r = waitpid(pid_, &status, 0);
  } while (r < 0 && errno == EINTR);
  // r < 0 is ECHILD only (this pid is ours): someone else reaped it, no zombie is left either way.
  if (r == pid_) exit_ = ExitStatus::FromWaitStatus(status);
}

absl::Status Subprocess::Signal(int sig) {
  if (pid_ <= 0 || exit_.has_value()) return absl::OkStatus();
  if (kill(pid_, sig) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("kill ", name_, " (pid ", pid_, ")"));
  }
  return absl::OkStatus();
}

absl::Status Subprocess::SignalGroup(int sig) {
  if (!group_) {
    return absl::FailedPreconditionError(
        absl::StrCat(name_, " (pid ", pid_, ") has no process group of its own"));
  }
  if (pid_ <= 0) return absl::OkStatus();
  if (kill(-pid_, sig) != 0 && errno != ESRCH) {
    return absl::ErrnoToStatus(errno,
                               absl::StrCat("kill process group of ", name_, " (pid ", pid_, ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<ExitStatus>> Subprocess::Poll() {
  if (exit_.has_value() || pid_ <= 0) return exit_;
  int status = 0;
  pid_t r;
  do {
    r = waitpid(pid_, &status, WNOHANG);
  } while (r < 0 && errno == EINTR);
  if (r < 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("waitpid ", name_, " (pid ", pid_, ")"));
  }
  if (r == pid_) exit_ = ExitStatus::FromWaitStatus(status);
  return exit_;
}

absl::StatusOr<ExitStatus> Subprocess::Wait() {
  if (pid_ <= 0) return absl::FailedPreconditionError("wait: no child");
  if (exit_.has_value()) return *exit_;
  int status = 0;
  pid_t r;
  do {
    r = waitpid(pid_, &status, 0);
  } while (r < 0 && errno == EINTR);
  if (r < 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("waitpid ", name_, " (pid ", pid_, ")"));
  }
  exit_ = ExitStatus::FromWaitStatus(status);
  return *exit_;
}

absl::StatusOr<std::optional<ExitStatus>> Subprocess::WaitFor(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  absl::Duration step = absl::Milliseconds(1);
  for (;;) {
    absl::StatusOr<std::optional<ExitStatus>> got = Poll();
    if (!got.ok() || got->has_value()) return got;
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) return std::optional<ExitStatus>();
    absl::SleepFor(std::min(step, left));
    step = std::min(step * 2, absl::Milliseconds(20));
  }
}

absl::StatusOr<ExitStatus> Subprocess::Stop(int sig, absl::Duration grace) {
  if (pid_ <= 0) return absl::FailedPreconditionError("stop: no child");
  if (exit_.has_value()) return *exit_;
  if (group_) {
    if (absl::Status s = SignalGroup(sig); !s.ok()) return s;
  }
  if (absl::Status s = Signal(sig); !s.ok()) return s;
  absl::StatusOr<std::optional<ExitStatus>> got = WaitFor(grace);
  if (!got.ok()) return got.status();
  if (got->has_value()) return **got;
  if (group_) {
    if (absl::Status s = SignalGroup(SIGKILL); !s.ok()) return s;
  }
  if (absl::Status s = Signal(SIGKILL); !s.ok()) return s;
  return Wait();
}

}  // namespace falcon::common
