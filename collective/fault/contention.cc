#include "collective/fault/contention.h"

#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/subprocess.h"

namespace falcon::collective::fault {

ContentionController::ContentionController(const std::vector<ContentionFault>& faults, int rank,
                                           ContentionOptions options)
    : options_(std::move(options)) {
  for (const ContentionFault& f : faults) {
    if (f.rank == rank) faults_.push_back(f);
  }
  procs_.resize(faults_.size());
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
    if (want && !procs_[i].has_value()) {
      if (absl::Status s = Start(i); !s.ok()) return s;
    } else if (!want && procs_[i].has_value()) {
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
  common::SpawnOptions options;
  options.argv = {options_.stress_ng_path, "--cpu", absl::StrCat(f.workers), "--quiet"};
  const std::vector<int> cpus = TargetCpus(f);
  if (!cpus.empty()) {
    options.argv.push_back("--taskset");
    options.argv.push_back(absl::StrJoin(cpus, ","));
  }
  // stress-ng forks its workers: a group of its own lets Stop() take them all, and the rank's
  // death takes stress-ng.
  options.new_process_group = true;
  options.parent_death_signal = SIGKILL;
  absl::StatusOr<common::Subprocess> proc = common::Subprocess::Spawn(options);
  if (!proc.ok()) {
    return absl::InternalError(absl::StrCat("contention: ", proc.status().message()));
  }
  procs_[index] = std::move(*proc);
  return absl::OkStatus();
}

void ContentionController::Stop(size_t index) {
  if (!procs_[index].has_value()) return;
  absl::StatusOr<common::ExitStatus> s = procs_[index]->Stop(SIGTERM, absl::Seconds(2));
  if (!s.ok()) {
    // The destructor below still SIGKILLs the group and reaps what is left.
    std::fprintf(stderr, "contention: stopping stress-ng: %s\n", s.status().ToString().c_str());
  }
  procs_[index].reset();
}

void ContentionController::StopAll() {
  for (size_t i = 0; i < procs_.size(); ++i) Stop(i);
}

std::vector<pid_t> ContentionController::running_pids() const {
  std::vector<pid_t> out;
  for (const std::optional<common::Subprocess>& p : procs_) {
    if (p.has_value()) out.push_back(p->pid());
  }
  return out;
}

}  // namespace falcon::collective::fault
