#include "deploy/demo/kernel_fault_thread.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace falcon::deploy::demo {

KernelFaultThread::KernelFaultThread(Cluster* cluster, const std::vector<InjectedFault>& faults,
                                     bool hold_until_armed)
    : cluster_(cluster), schedule_(faults), tail_(cluster->TrainerJsonLog()) {
  if (hold_until_armed) schedule_.HoldUntilArmed();
  applied_.assign(faults.size(), -1);
  removed_.assign(faults.size(), -1);
  apply_errors_.assign(faults.size(), "");
  thread_ = std::thread([this, faults] { Loop(faults); });
}

KernelFaultThread::~KernelFaultThread() { Finish(); }

void KernelFaultThread::DetectionArmed(int64_t iteration) {
  int64_t unset = -1;
  armed_.compare_exchange_strong(unset, iteration);
}

void KernelFaultThread::Finish() {
  if (finished_) return;
  finished_ = true;
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
  const int64_t next = tail_.Latest() + 1;
  if (const int64_t armed = armed_.load(); armed >= 0) schedule_.Armed(armed);
  if (schedule_.Waiting()) {
    for (size_t i = 0; i < applied_.size(); ++i) {
      if (applied_[i] < 0) {
        apply_errors_[i] = absl::StrCat(
            "it waits for detection to be armed, and the controller had not armed it by "
            "iteration ",
            next - 1);
        errors_.push_back(absl::StrCat("fault ", i, " never applied: ", apply_errors_[i]));
      }
    }
  }
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
    if (const int64_t armed = armed_.load(); armed >= 0) schedule_.Armed(armed);
    if (finished >= 0) {
      for (const FaultSchedule::Step& step : schedule_.Advance(finished)) {
        absl::Status s = step.apply
                             ? cluster_->ApplyFault(step.fault, faults[step.fault], finished + 1)
                             : cluster_->RemoveFault(step.fault, finished + 1);
        if (!s.ok()) {
          if (step.apply) apply_errors_[step.fault] = std::string(s.message());
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
