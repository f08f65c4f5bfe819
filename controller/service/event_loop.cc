#include "controller/service/event_loop.h"

#include "absl/synchronization/notification.h"

namespace falcon::controller::service {

EventLoop::EventLoop(std::function<void()> periodic, absl::Duration period,
                     std::function<void()> after_burst)
    : periodic_(std::move(periodic)), period_(period), after_burst_(std::move(after_burst)) {
  thread_ = std::thread([this] { Run(); });
}

EventLoop::~EventLoop() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  thread_.join();
}

void EventLoop::Post(std::function<void()> task) {
  absl::MutexLock lock(&mu_);
  queue_.push_back(std::move(task));
}

void EventLoop::RunSync(std::function<void()> task) {
  absl::Notification done;
  Post([&] {
    task();
    done.Notify();
  });
  done.WaitForNotification();
}

uint64_t EventLoop::tasks_run() const {
  absl::MutexLock lock(&mu_);
  return tasks_run_;
}

void EventLoop::Run() {
  absl::Time next_periodic = absl::Now() + period_;
  int burst = 0;  // Tasks run since the burst task last ran.
  for (;;) {
    if (burst > 0 && after_burst_) {
      bool dry = false;
      {
        absl::MutexLock lock(&mu_);
        dry = queue_.empty();
      }
      if (dry || burst >= kMaxBurst) {
        after_burst_();
        burst = 0;
      }
    }
    std::function<void()> task;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_ || !queue_.empty(); };
      if (periodic_) {
        mu_.AwaitWithDeadline(absl::Condition(&ready), next_periodic);
      } else {
        mu_.Await(absl::Condition(&ready));
      }
      if (!queue_.empty()) {
        task = std::move(queue_.front());
        queue_.pop_front();
        ++tasks_run_;
      } else if (stop_) {
        return;
      }
    }
    if (task) {
      task();
      ++burst;
    }
    if (periodic_ && absl::Now() >= next_periodic) {
      periodic_();
      ++burst;
      next_periodic = absl::Now() + period_;
    }
  }
}

}  // namespace falcon::controller::service
