// Transport over one Gloo context (TCP pairs), with link-fault shaping on the send side: right
// before a message is handed to Gloo, the runtime's LinkShaper sleeps for the (this rank -> peer)
// link's injected delay/bandwidth cost, like a network plugin adding sleeps would.
//
// Gloo exceptions become absl::Status naming the peer: kUnavailable when the connection broke
// (peer died), kDeadlineExceeded when Gloo's timeout fired. Not thread-safe.
#ifndef FALCON_COLLECTIVE_GLOO_GLOO_TRANSPORT_H_
#define FALCON_COLLECTIVE_GLOO_GLOO_TRANSPORT_H_

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "collective/comm_runtime.h"
#include "collective/ring/transport.h"

namespace gloo {
class Context;
}  // namespace gloo

namespace falcon::collective::gloo {

class GlooTransport : public ring::Transport {
 public:
  // Builds an error about comm rank `peer` (the communicator formats its own identity in).
  using ErrorFn = std::function<absl::Status(absl::StatusCode, int peer, absl::string_view)>;

  // `members` maps comm ranks to global ranks (for the link shaper); `runtime` supplies the
  // shaper and the iteration. `slot` separates this transport's messages from other users of
  // the same context.
  GlooTransport(std::shared_ptr<::gloo::Context> context, std::vector<int32_t> members,
                const CommRuntime* runtime, uint64_t slot, std::chrono::milliseconds timeout,
                ErrorFn error);

  int rank() const override;
  int size() const override;
  absl::Status Send(int peer, const void* data, size_t bytes) override;
  absl::Status Recv(int peer, void* data, size_t bytes) override;
  absl::Status SendRecv(int dst, const void* send, size_t send_bytes, int src, void* recv,
                        size_t recv_bytes) override;

 private:
  void Shape(int peer, size_t bytes) const;

  std::shared_ptr<::gloo::Context> context_;
  std::vector<int32_t> members_;
  const CommRuntime* runtime_;
  const uint64_t slot_;
  const std::chrono::milliseconds timeout_;
  ErrorFn error_;
};

}  // namespace falcon::collective::gloo

#endif  // FALCON_COLLECTIVE_GLOO_GLOO_TRANSPORT_H_
