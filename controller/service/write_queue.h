// Serializes writes on a gRPC callback stream: a reactor allows one write in flight, while the
// controller loop produces messages at any time. Messages are queued and written one after the
// other; Finish is called once the queue has drained. Thread-safe. `Reactor` is a
// grpc::ServerBidiReactor or grpc::ServerWriteReactor writing `Message`.
#ifndef FALCON_CONTROLLER_SERVICE_WRITE_QUEUE_H_
#define FALCON_CONTROLLER_SERVICE_WRITE_QUEUE_H_

#include <grpcpp/grpcpp.h>

#include <deque>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace falcon::controller::service {

template <typename Reactor, typename Message>
class WriteQueue {
 public:
  // Bounds the queue: a peer that does not read is finished with RESOURCE_EXHAUSTED instead of
  // growing the controller's memory.
  static constexpr size_t kMaxQueued = 1 << 16;

  explicit WriteQueue(Reactor* reactor) : reactor_(reactor) {}

  // Queues `message`; false once finishing or done.
  bool Write(const Message& message) {
    const Message* start = nullptr;
    {
      absl::MutexLock lock(&mu_);
      if (finish_requested_ || done_) return false;
      if (queue_.size() >= kMaxQueued) {
        RequestFinishLocked(
            grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "peer does not read its stream"));
        return false;
      }
      queue_.push_back(message);
      if (!writing_) {
        writing_ = true;
        start = &queue_.front();
      }
    }
    if (start != nullptr) reactor_->StartWrite(start);  // deque::push_back keeps references.
    return true;
  }

  // From the reactor's OnWriteDone.
  void OnWriteDone(bool ok) {
    const Message* next = nullptr;
    bool finish = false;
    grpc::Status status;
    {
      absl::MutexLock lock(&mu_);
      if (!queue_.empty()) queue_.pop_front();
      if (!ok) queue_.clear();  // The stream broke; nothing more can be written.
      if (!queue_.empty()) {
        next = &queue_.front();
      } else {
        writing_ = false;
        finish = TakeFinishLocked(&status);
      }
    }
    if (next != nullptr) reactor_->StartWrite(next);
    if (finish) reactor_->Finish(status);
  }

  // Finishes the stream with `status` once queued messages are written (at most once).
  void RequestFinish(grpc::Status status) {
    bool finish = false;
    {
      absl::MutexLock lock(&mu_);
      RequestFinishLocked(std::move(status));
      finish = !writing_ && TakeFinishLocked(&status);
    }
    if (finish) reactor_->Finish(status);
  }

  bool finish_requested() const {
    absl::MutexLock lock(&mu_);
    return finish_requested_;
  }

  // From the reactor's OnDone: no call reaches the reactor afterwards.
  void MarkDone() {
    absl::MutexLock lock(&mu_);
    done_ = true;
    queue_.clear();
  }

 private:
  void RequestFinishLocked(grpc::Status status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finish_requested_) return;
    finish_requested_ = true;
    finish_status_ = std::move(status);
  }
  bool TakeFinishLocked(grpc::Status* status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!finish_requested_ || finished_ || done_) return false;
    finished_ = true;
    *status = finish_status_;
    return true;
  }

  Reactor* const reactor_;
  mutable absl::Mutex mu_;
  std::deque<Message> queue_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool finish_requested_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status finish_status_ ABSL_GUARDED_BY(mu_);
};

}  // namespace falcon::controller::service

#endif  // FALCON_CONTROLLER_SERVICE_WRITE_QUEUE_H_
