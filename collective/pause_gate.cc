#include "collective/pause_gate.h"

#include <algorithm>

namespace falcon::collective {

void PauseGate::Pause(absl::Duration max_hold) {
  absl::MutexLock lock(&mu_);
  paused_ = true;
  ++generation_;
  deadline_ =
      max_hold == absl::InfiniteDuration() ? absl::InfiniteFuture() : absl::Now() + max_hold;
  paused_flag_.store(true, std::memory_order_release);
}

void PauseGate::Resume() {
  absl::MutexLock lock(&mu_);
  paused_ = false;
  deadline_ = absl::InfiniteFuture();
  paused_flag_.store(false, std::memory_order_release);
}

void PauseGate::WaitSlow() {
  absl::MutexLock lock(&mu_);
  const std::thread::id self = std::this_thread::get_id();
  if (std::find(bypass_.begin(), bypass_.end(), self) != bypass_.end()) return;
  ++held_;
  while (paused_) {
    const uint64_t generation = generation_;
    const absl::Time deadline = deadline_;
    auto released = [this, generation]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return !paused_ || generation_ != generation;
    };
    if (!mu_.AwaitWithDeadline(absl::Condition(&released), deadline)) {
      // Max hold passed without Resume() or a new Pause(): release everybody.
      paused_ = false;
      deadline_ = absl::InfiniteFuture();
      paused_flag_.store(false, std::memory_order_release);
      ++auto_releases_;
    }
  }
  --held_;
}

int PauseGate::held_count() const {
  absl::MutexLock lock(&mu_);
  return held_;
}

bool PauseGate::AwaitHeld(int n, absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto done = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return held_ >= n || !paused_; };
  mu_.AwaitWithTimeout(absl::Condition(&done), timeout);
  return held_ >= n;
}

int64_t PauseGate::auto_releases() const {
  absl::MutexLock lock(&mu_);
  return auto_releases_;
}

PauseGate::ScopedBypass::ScopedBypass(PauseGate* gate)
    : gate_(gate), id_(std::this_thread::get_id()) {
  absl::MutexLock lock(&gate_->mu_);
  gate_->bypass_.push_back(id_);
}

PauseGate::ScopedBypass::~ScopedBypass() {
  absl::MutexLock lock(&gate_->mu_);
  auto it = std::find(gate_->bypass_.begin(), gate_->bypass_.end(), id_);
  if (it != gate_->bypass_.end()) gate_->bypass_.erase(it);
}

}  // namespace falcon::collective
