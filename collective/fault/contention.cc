#include "collective/fault/contention.h"

#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace falcon::collective {

ContentionController::ContentionController(const std::vector<ContentionFault>& faults, int rank,
                                           ContentionOptions options)
    : options_(std::move(options)) {
  for (const ContentionFault& f : faults) {
    if (f.rank == rank) faults_.push_back(f);
  }
  pids_.assign(faults_.size(), 0);
}

ContentionController::~ContentionController() { StopAll(); }

std::vector<int> ContentionController::TargetCpus(const ContentionFault& fault) {
  if (!fault.cpus.empty()) return fault.cpus;
  std::vector<int> cpus;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &set)) cpus.push_back(c);
    }
  }
  return cpus;
}

absl::Status ContentionController::OnIteration(int64_t iteration) {
  for (size_t i = 0; i < faults_.size(); ++i) {
    const bool want = faults_[i].window.Contains(iteration);
    if (want && pids_[i] == 0) {
      if (absl::Status s = Start(i); !s.ok()) return s;
    } else if (!want && pids_[i] != 0) {
      Stop(i);
    }
  }
  return absl::OkStatus();
}

absl::Status ContentionController::Start(size_t index) {
  if (access(options_.stress_ng_path.c_str(), X_OK) != 0) {
    return absl::FailedPreconditionError(absl::StrCat("contention: stress-ng not found at '",
                                                      options_.stress_ng_path,
                                                      "' (install the Debian package stress-ng)"));
  }
  const ContentionFault& f = faults_[index];
  // Everything the child needs is built before fork: after fork only async-signal-safe calls.
  std::vector<std::string> args = {options_.stress_ng_path, "--cpu", absl::StrCat(f.workers),
                                   "--quiet"};
  const std::vector<int> cpus = TargetCpus(f);
  if (!cpus.empty()) {
    args.push_back("--taskset");
    args.push_back(absl::StrJoin(cpus, ","));
  }
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError(absl::StrCat("contention: fork failed, errno ", errno));
  if (pid == 0) {
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    execv(argv[0], argv.data());
    _exit(127);
  }
  setpgid(pid, pid);  // Also from the parent, so Stop() can signal the group at once.
  pids_[index] = pid;
  return absl::OkStatus();
}

void ContentionController::Stop(size_t index) {
  const pid_t pid = pids_[index];
  if (pid == 0) return;
  pids_[index] = 0;
  kill(-pid, SIGTERM);
  kill(pid, SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (true) {
    int status = 0;
    const pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid || (r < 0 && errno == ECHILD)) break;
    if (std::chrono::steady_clock::now() > deadline) {
      kill(-pid, SIGKILL);
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

void ContentionController::StopAll() {
  for (size_t i = 0; i < pids_.size(); ++i) Stop(i);
}

std::vector<pid_t> ContentionController::running_pids() const {
  std::vector<pid_t> out;
  for (pid_t p : pids_) {
    if (p != 0) out.push_back(p);
  }
  return out;
}

}  // namespace falcon::collective
