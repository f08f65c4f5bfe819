// Per-process state shared by every communicator of a rank: the op observer, the pause gate, the
// profiling switch, the iteration hint, the op sequence counter, the clock and the link-fault
// shaper. The trainer creates one (shared_ptr) and hands it to the world communicator; splits
// inherit it. The shim reaches the observer, gate and switches through it.
//
// Thread-safe. Setters take effect for ops that start afterwards.
#ifndef FALCON_COLLECTIVE_COMM_RUNTIME_H_
#define FALCON_COLLECTIVE_COMM_RUNTIME_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "collective/fault/fault_spec.h"
#include "collective/fault/link_shaper.h"
#include "collective/fault/sleeper.h"
#include "collective/observer.h"
#include "collective/pause_gate.h"
#include "common/clock.h"

namespace falcon::collective {

struct CommRuntimeOptions {
  // Global rank of this process, [0, world size); reported in every OpEvent.
  int rank = 0;
  // Source of host_start_ns/host_end_ns. Default (nullptr): a RealClock owned by the runtime.
  // Must outlive the runtime.
  const common::Clock* clock = nullptr;
  // Slow links applied on this rank's send path (only faults with src == rank matter).
  std::vector<fault::LinkFault> link_faults;
  // How link delays are spent. Default (nullptr): a SleepingSleeper owned by the runtime.
  fault::Sleeper* link_sleeper = nullptr;
};

class CommRuntime {
 public:
  explicit CommRuntime(CommRuntimeOptions options);
  CommRuntime(const CommRuntime&) = delete;
  CommRuntime& operator=(const CommRuntime&) = delete;

  int rank() const { return rank_; }
  const common::Clock& clock() const { return *clock_; }

  // The observer every op reports to; nullptr (default) reports nothing. Not owned; it must
  // outlive every communicator using this runtime (or be reset to nullptr first).
  void SetObserver(OpObserver* observer) { observer_.store(observer, std::memory_order_release); }
  OpObserver* observer() const { return observer_.load(std::memory_order_acquire); }

  PauseGate& pause_gate() { return pause_gate_; }

  // Device timing with CUDA events (NCCL backend). Off by default.
  void SetProfiling(bool on) { profiling_.store(on, std::memory_order_relaxed); }
  bool profiling() const { return profiling_.load(std::memory_order_relaxed); }

  // Iteration the trainer is in (OpEvent.iteration; fault windows). -1 (default) = unknown.
  void SetIteration(int64_t iteration) { iteration_.store(iteration, std::memory_order_relaxed); }
  int64_t iteration() const { return iteration_.load(std::memory_order_relaxed); }

  // Next op sequence number: 1, 2, 3, ... across all communicators of the process.
  uint64_t NextSeq() { return seq_.fetch_add(1, std::memory_order_relaxed) + 1; }

  // nullptr when no link fault has this rank as sender.
  const fault::LinkShaper* link_shaper() const { return link_shaper_.get(); }

 private:
  const int rank_;
  std::unique_ptr<common::Clock> owned_clock_;
  const common::Clock* clock_;
  std::unique_ptr<fault::Sleeper> owned_sleeper_;
  std::unique_ptr<fault::LinkShaper> link_shaper_;
  std::atomic<OpObserver*> observer_{nullptr};
  PauseGate pause_gate_;
  std::atomic<bool> profiling_{false};
  std::atomic<int64_t> iteration_{-1};
  std::atomic<uint64_t> seq_{0};
};

}  // namespace falcon::collective

#endif  // FALCON_COLLECTIVE_COMM_RUNTIME_H_
