// The controller loop: one thread that runs every piece of controller logic in the order it was
// posted, so the managers need no locks (as Ray's GCS main io_context). gRPC reactors post work
// here and never block; an optional periodic task (the controller tick) runs between posts, and an
// optional burst task (the controller's group commit: one store sync for everything the burst
// committed) runs once the queue has run dry, or after kMaxBurst tasks in a row.
// Thread-safe.
#ifndef FALCON_CONTROLLER_SERVICE_EVENT_LOOP_H_
#define FALCON_CONTROLLER_SERVICE_EVENT_LOOP_H_

#include <deque>
#include <functional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace falcon::controller::service {

class EventLoop {
 public:
  // Tasks run at most before the burst task runs.
  static constexpr int kMaxBurst = 64;

  // Starts the loop thread. `periodic` (may be empty) runs every `period` of real time;
  // `after_burst` (may be empty) after every run of tasks (periodic included), see above.
  explicit EventLoop(std::function<void()> periodic = nullptr,
                     absl::Duration period = absl::Seconds(1),
                     std::function<void()> after_burst = nullptr);
  // Runs what is queued, then stops and joins the thread.
  ~EventLoop();

  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  // Queues `task`. Never blocks (beyond the queue's mutex).
  void Post(std::function<void()> task);
  // Runs `task` on the loop and waits for it. Must not be called from the loop thread.
  void RunSync(std::function<void()> task);
  bool InLoopThread() const { return std::this_thread::get_id() == thread_.get_id(); }
  // Tasks run so far.
  uint64_t tasks_run() const;

 private:
  void Run();

  std::function<void()> periodic_;
  const absl::Duration period_;
  std::function<void()> after_burst_;
  mutable absl::Mutex mu_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t tasks_run_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;
};

}  // namespace falcon::controller::service

#endif  // FALCON_CONTROLLER_SERVICE_EVENT_LOOP_H_
