#include "collective/ring/thread_transport.h"

#include <cstring>

#include "absl/strings/str_cat.h"

namespace falcon::collective::ring {

class ThreadTransportHub::Endpoint : public Transport {
 public:
  Endpoint(ThreadTransportHub* hub, int rank) : hub_(hub), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return hub_->size_; }

  absl::Status Send(int peer, const void* data, size_t bytes) override {
    if (bytes == 0) return absl::OkStatus();
    if (peer < 0 || peer >= size() || peer == rank_) {
      return absl::InvalidArgumentError(absl::StrCat("bad peer ", peer));
    }
    absl::MutexLock lock(&hub_->mu_);
    hub_->queues_[rank_ * size() + peer].emplace_back(static_cast<const char*>(data), bytes);
    hub_->sent_[rank_ * size() + peer] += bytes;
    return absl::OkStatus();
  }

  absl::Status Recv(int peer, void* data, size_t bytes) override {
    if (bytes == 0) return absl::OkStatus();
    if (peer < 0 || peer >= size() || peer == rank_) {
      return absl::InvalidArgumentError(absl::StrCat("bad peer ", peer));
    }
    absl::MutexLock lock(&hub_->mu_);
    auto& q = hub_->queues_[peer * size() + rank_];
    auto ready = [&q]() { return !q.empty(); };
    if (!hub_->mu_.AwaitWithTimeout(absl::Condition(&ready), hub_->timeout_)) {
      return absl::DeadlineExceededError(
          absl::StrCat("rank ", rank_, ": nothing from rank ", peer));
    }
    const std::string msg = std::move(q.front());
    q.pop_front();
    if (msg.size() != bytes) {
      return absl::InternalError(absl::StrCat("rank ", rank_, " expected ", bytes,
                                              " bytes from rank ", peer, ", got ", msg.size()));
    }
    std::memcpy(data, msg.data(), bytes);
    return absl::OkStatus();
  }

  absl::Status SendRecv(int dst, const void* send, size_t send_bytes, int src, void* recv,
                        size_t recv_bytes) override {
    if (auto s = Send(dst, send, send_bytes); !s.ok()) return s;
    return Recv(src, recv, recv_bytes);
  }

 private:
  ThreadTransportHub* hub_;
  int rank_;
};

ThreadTransportHub::ThreadTransportHub(int size, absl::Duration timeout)
    : size_(size),
      timeout_(timeout),
      queues_(static_cast<size_t>(size * size)),
      sent_(static_cast<size_t>(size * size), 0) {
  for (int r = 0; r < size; ++r) endpoints_.push_back(std::make_unique<Endpoint>(this, r));
}

ThreadTransportHub::~ThreadTransportHub() = default;

Transport& ThreadTransportHub::endpoint(int r) { return *endpoints_[r]; }

size_t ThreadTransportHub::bytes_sent(int src, int dst) const {
  absl::MutexLock lock(&mu_);
  return sent_[src * size_ + dst];
}

}  // namespace falcon::collective::ring
