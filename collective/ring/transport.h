// Blocking point-to-point byte transport between the members of one communicator, the layer
// that ring_collectives.h builds every collective from (so each message crosses exactly one
// link, and a slow link shows up in exactly the steps that use it). Peers are communicator ranks.
//
// Errors: kUnavailable (peer gone), kDeadlineExceeded (no progress within the timeout), each
// naming the peer. Not thread-safe: one call at a time.
#ifndef FALCON_COLLECTIVE_RING_TRANSPORT_H_
#define FALCON_COLLECTIVE_RING_TRANSPORT_H_

#include <cstddef>

#include "absl/status/status.h"

namespace falcon::collective::ring {

class Transport {
 public:
  virtual ~Transport() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Sends `bytes` at `data` to `peer`; returns when the buffer may be reused. 0 bytes: no-op.
  virtual absl::Status Send(int peer, const void* data, size_t bytes) = 0;
  // Receives exactly `bytes` from `peer` into `data`. 0 bytes: no-op.
  virtual absl::Status Recv(int peer, void* data, size_t bytes) = 0;
  // Sends to `dst` and receives from `src` concurrently (so rings cannot deadlock); returns when
  // both completed. The receive is posted before the send.
  virtual absl::Status SendRecv(int dst, const void* send, size_t send_bytes, int src, void* recv,
                                size_t recv_bytes) = 0;
};

}  // namespace falcon::collective::ring

#endif  // FALCON_COLLECTIVE_RING_TRANSPORT_H_
