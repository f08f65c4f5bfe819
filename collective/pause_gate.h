// The pause point: when engaged, every communicator op that starts afterwards is held at its
// start, before it touches the transport, until Resume() (or the pause's max hold) releases it.
// The shim engages the gate on every rank at the same iteration boundary (a Pause directive), so
// all ranks stop at the same op and no op is left half-done; the validation executor then runs its
// own ops from a thread inside a ScopedBypass. docs/algorithms.md#pause (lightweight suspension).
// Engage it at such a consistent point: a rank already inside a collective whose peers are held
// keeps waiting and fails after its communicator timeout.
//
// Thread-safe. The not-paused path of WaitIfPaused is one atomic load.
#ifndef FALCON_COLLECTIVE_PAUSE_GATE_H_
#define FALCON_COLLECTIVE_PAUSE_GATE_H_

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace falcon::collective {

class PauseGate {
 public:
  PauseGate() = default;
  PauseGate(const PauseGate&) = delete;
  PauseGate& operator=(const PauseGate&) = delete;

  // Engages the gate. Ops starting after this are held until Resume() or until `max_hold` has
  // passed (a safety net: the gate then releases itself). Pausing an already paused gate moves
  // the deadline.
  void Pause(absl::Duration max_hold = absl::InfiniteDuration()) ABSL_LOCKS_EXCLUDED(mu_);
  // Releases every held op. No-op when not paused.
  void Resume() ABSL_LOCKS_EXCLUDED(mu_);
  bool paused() const { return paused_flag_.load(std::memory_order_acquire); }

  // Called by communicators at the start of every op: returns at once when not paused or when
  // the calling thread is inside a ScopedBypass; otherwise blocks until released.
  void WaitIfPaused() ABSL_LOCKS_EXCLUDED(mu_) {
    if (paused_flag_.load(std::memory_order_acquire)) WaitSlow();
  }

  // Number of threads currently held.
  int held_count() const ABSL_LOCKS_EXCLUDED(mu_);
  // Blocks until at least `n` threads are held; false if `timeout` passes first or the gate is
  // released meanwhile.
  bool AwaitHeld(int n, absl::Duration timeout) ABSL_LOCKS_EXCLUDED(mu_);
  // How many pauses ended by their max hold rather than by Resume().
  int64_t auto_releases() const ABSL_LOCKS_EXCLUDED(mu_);

  // Lets the constructing thread's ops pass a paused gate until destroyed (for validation ops).
  class ScopedBypass {
   public:
    explicit ScopedBypass(PauseGate* gate);
    ~ScopedBypass();
    ScopedBypass(const ScopedBypass&) = delete;
    ScopedBypass& operator=(const ScopedBypass&) = delete;

   private:
    PauseGate* gate_;
    std::thread::id id_;
  };

 private:
  void WaitSlow() ABSL_LOCKS_EXCLUDED(mu_);

  std::atomic<bool> paused_flag_{false};
  mutable absl::Mutex mu_;
  bool paused_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;  // Bumped by every Pause().
  absl::Time deadline_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  int held_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t auto_releases_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::thread::id> bypass_ ABSL_GUARDED_BY(mu_);
};

}  // namespace falcon::collective

#endif  // FALCON_COLLECTIVE_PAUSE_GATE_H_
