// A bounded, lock-free, single-producer single-consumer ring buffer.
//
// Exactly one thread may call the producer methods (TryPush) and exactly one thread the consumer
// methods (TryPop, PopBulk) at a time; SizeApprox and capacity may be called from any thread.
// TryPush never blocks and never allocates: when the ring is full it returns false and the caller
// decides what to count. Indices are 64-bit and never wrap in practice. The producer and consumer
// each cache the other side's index so that a push or pop touches one shared cache line in the
// common case (the layout of Rigtorp's SPSCQueue and folly::ProducerConsumerQueue).
#ifndef FALCON_TRAINER_SHIM_SPSC_RING_H_
#define FALCON_TRAINER_SHIM_SPSC_RING_H_

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <type_traits>

namespace falcon::trainer_shim {

template <typename T>
class SpscRing {
  static_assert(std::is_trivially_copyable_v<T>, "SpscRing holds trivially copyable values");

 public:
  // `min_capacity` is rounded up to a power of two (at least 2).
  explicit SpscRing(uint64_t min_capacity)
      : mask_(RoundUp(min_capacity) - 1), slots_(new T[mask_ + 1]) {}
  SpscRing(const SpscRing&) = delete;
  SpscRing& operator=(const SpscRing&) = delete;

  uint64_t capacity() const { return mask_ + 1; }

  // Producer only. False (and nothing written) when full.
  bool TryPush(const T& value) {
    const uint64_t head = head_.load(std::memory_order_relaxed);
    if (head - cached_tail_ > mask_) {
      cached_tail_ = tail_.load(std::memory_order_acquire);
      if (head - cached_tail_ > mask_) return false;
    }
    slots_[head & mask_] = value;
    head_.store(head + 1, std::memory_order_release);
    return true;
  }

  // Consumer only. False when empty.
  bool TryPop(T* out) { return PopBulk(out, 1) == 1; }

  // Consumer only. Moves up to `max` values into `out`, oldest first; returns how many.
  size_t PopBulk(T* out, size_t max) {
    const uint64_t tail = tail_.load(std::memory_order_relaxed);
    if (cached_head_ - tail < max) cached_head_ = head_.load(std::memory_order_acquire);
    const uint64_t n = std::min<uint64_t>(cached_head_ - tail, max);
    for (uint64_t i = 0; i < n; ++i) out[i] = slots_[(tail + i) & mask_];
    if (n > 0) tail_.store(tail + n, std::memory_order_release);
    return static_cast<size_t>(n);
  }

  // Any thread; exact only when neither side is active.
  uint64_t SizeApprox() const {
    const uint64_t tail = tail_.load(std::memory_order_acquire);
    const uint64_t head = head_.load(std::memory_order_acquire);
    return head >= tail ? head - tail : 0;
  }

 private:
  static uint64_t RoundUp(uint64_t n) {
    uint64_t c = 2;
    while (c < n) c <<= 1;
    return c;
  }

  const uint64_t mask_;
  const std::unique_ptr<T[]> slots_;
  alignas(64) std::atomic<uint64_t> head_{0};  // Next slot to write; written by the producer.
  uint64_t cached_tail_ = 0;                   // Producer's last view of tail_.
  alignas(64) std::atomic<uint64_t> tail_{0};  // Next slot to read; written by the consumer.
  uint64_t cached_head_ = 0;                   // Consumer's last view of head_.
};

}  // namespace falcon::trainer_shim

#endif  // FALCON_TRAINER_SHIM_SPSC_RING_H_
