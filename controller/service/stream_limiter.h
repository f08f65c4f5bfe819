// Counts the open streams (agent Telemetry.Connect and Control.WatchEvents) per peer host and
// refuses one more beyond ResourceLimits::max_streams_per_peer with RESOURCE_EXHAUSTED naming the
// limit and the peer (controller/resource_limits.h), counted in
// falcon_controller_limit_refusals_total{limit="max_streams_per_peer"}. Thread-safe: the gRPC
// adapters call it from gRPC threads.
#ifndef FALCON_CONTROLLER_SERVICE_STREAM_LIMITER_H_
#define FALCON_CONTROLLER_SERVICE_STREAM_LIMITER_H_

#include <cstdint>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "controller/metrics/controller_metrics.h"
#include "controller/resource_limits.h"

namespace falcon::controller::service {

// The host part of a gRPC peer address: "ipv4:10.0.0.7:51234" -> "ipv4:10.0.0.7",
// "ipv6:[::1]:51234" -> "ipv6:[::1]"; any other form (unix sockets) as it is.
std::string PeerHost(const std::string& peer);

class StreamLimiter {
 public:
  // `metrics` (nullable) must outlive the limiter.
  StreamLimiter(ResourceLimits limits, metrics::ControllerMetrics* metrics)
      : limits_(limits), metrics_(metrics) {}

  // Admits a new stream from `peer` (a gRPC peer address; `what` names the RPC for the log).
  // OK: the caller must call Release(peer) once the stream is done. RESOURCE_EXHAUSTED when the
  // peer's host already has max_streams_per_peer open streams (logged and counted).
  absl::Status Admit(const std::string& peer, const std::string& what);
  void Release(const std::string& peer);
  // Open streams of `peer`'s host.
  size_t open(const std::string& peer) const;

 private:
  const ResourceLimits limits_;
  metrics::ControllerMetrics* const metrics_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, size_t> open_ ABSL_GUARDED_BY(mu_);  // host -> streams
};

}  // namespace falcon::controller::service

#endif  // FALCON_CONTROLLER_SERVICE_STREAM_LIMITER_H_
