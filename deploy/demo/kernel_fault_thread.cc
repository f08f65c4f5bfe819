#include "deploy/demo/kernel_fault_thread.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace falcon::deploy::demo {

KernelFaultThread::KernelFaultThread(Cluster* cluster, const std::vector<InjectedFault>& faults)
    : cluster_(cluster), schedule_(faults), tail_(cluster->TrainerJsonLog()) {
  applied_.assign(faults.size(), -1);
  removed_.assign(faults.size(), -1);
  thread_ = std::thread([this, faults] { Loop(faults); });
}

KernelFaultThread::~KernelFaultThread() { Finish(); }

void KernelFaultThread::Finish() {
  if (finished_) return;
  finished_ = true;
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
  const int64_t next = tail_.Latest() + 1;
  for (int i : schedule_.Active()) {
    if (absl::Status s = cluster_->RemoveFault(i, next); !s.ok()) {
      errors_.push_back(absl::StrCat("removing fault ", i, ": ", s.message()));
    }
    removed_[i] = next;
  }
}

void KernelFaultThread::Loop(const std::vector<InjectedFault>& faults) {
  while (!stop_.load()) {
    const int64_t finished = tail_.Latest();
    if (finished >= 0) {
      for (const FaultSchedule::Step& step : schedule_.Advance(finished)) {
        absl::Status s = step.apply
                             ? cluster_->ApplyFault(step.fault, faults[step.fault], finished + 1)
                             : cluster_->RemoveFault(step.fault, finished + 1);
        if (!s.ok()) {
          errors_.push_back(absl::StrCat(step.apply ? "applying" : "removing", " fault ",
                                         step.fault, " (", faults[step.fault].Describe(),
                                         "): ", s.message()));
          continue;
        }
        (step.apply ? applied_ : removed_)[step.fault] = finished + 1;
      }
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
}

}  // namespace falcon::deploy::demo
