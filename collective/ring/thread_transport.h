// In-process Transport for tests: `size` endpoints exchanging messages through per-link FIFO
// queues, one thread per rank. Sends are buffered (they never block). Also counts the bytes sent
// on each directed link. Thread-safe across endpoints; one call at a time per endpoint.
#ifndef FALCON_COLLECTIVE_RING_THREAD_TRANSPORT_H_
#define FALCON_COLLECTIVE_RING_THREAD_TRANSPORT_H_

#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "collective/ring/transport.h"

namespace falcon::collective::ring {

class ThreadTransportHub {
 public:
  explicit ThreadTransportHub(int size, absl::Duration timeout = absl::Seconds(10));
  ~ThreadTransportHub();
  // Endpoint of rank `r`, owned by the hub.
  Transport& endpoint(int r);
  // Bytes sent so far from rank src to rank dst.
  size_t bytes_sent(int src, int dst) const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  class Endpoint;
  friend class Endpoint;

  const int size_;
  const absl::Duration timeout_;
  mutable absl::Mutex mu_;
  // queues_[src * size + dst]
  std::vector<std::deque<std::string>> queues_ ABSL_GUARDED_BY(mu_);
  std::vector<size_t> sent_ ABSL_GUARDED_BY(mu_);
  std::vector<std::unique_ptr<Endpoint>> endpoints_;
};

}  // namespace falcon::collective::ring

#endif  // FALCON_COLLECTIVE_RING_THREAD_TRANSPORT_H_
