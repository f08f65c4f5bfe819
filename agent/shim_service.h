// The Shim gRPC service (shim.proto Shim.Attach) on the agent's unix socket: a callback
// (reactor) server that turns each stream into ShimHub events. Writes are queued per stream and
// never block the hub; a shim that stops reading is cut off after `max_queued` messages.
//
// ShimServer owns the grpc::Server: binds `unix:<path>`, then sets the socket's mode (0660) and
// group. An existing socket file is probed first: when a process accepts on it (another agent
// serves the path) Start fails with kAlreadyExists; when nothing answers the stale file is
// replaced. Shutdown removes the socket file only if it is still the one this server bound
// (same device and inode). The socket is bound at `<path>.<pid>` and renamed to `<path>`.
#ifndef FALCON_AGENT_SHIM_SERVICE_H_
#define FALCON_AGENT_SHIM_SERVICE_H_

#include <grpcpp/grpcpp.h>
#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "agent/shim_hub.h"
#include "proto/falcon/v1/shim.grpc.pb.h"

namespace falcon::agent {

class ShimService final : public v1::Shim::CallbackService {
 public:
  // `hub` must outlive the service.
  explicit ShimService(ShimHub* hub, size_t max_queued = 16384)
      : hub_(hub), max_queued_(max_queued) {}

  grpc::ServerBidiReactor<v1::ShimMessage, v1::AgentToShim>* Attach(
      grpc::CallbackServerContext* context) override;

 private:
  ShimHub* const hub_;
  const size_t max_queued_;
};

class ShimServer {
 public:
  struct Options {
    std::string socket_path;  // Filesystem path of the unix socket.
    std::string group;        // Group owning the socket; empty keeps the agent's.
    unsigned mode = 0660;     // Socket file mode.
  };

  // kInvalidArgument: unknown group. kAlreadyExists: another process serves `socket_path`.
  // kFailedPrecondition: `socket_path` exists and is not a socket. kUnavailable: cannot bind.
  // kPermissionDenied: cannot set mode or group.
  static absl::StatusOr<std::unique_ptr<ShimServer>> Start(const Options& options, ShimHub* hub);
  ~ShimServer();

  // Ends every stream and stops serving; waits up to `grace` for handlers. Idempotent.
  void Shutdown(absl::Duration grace);
  const std::string& socket_path() const { return options_.socket_path; }

 private:
  ShimServer(Options options, ShimHub* hub) : options_(std::move(options)), service_(hub) {}

  struct FileId {
    dev_t dev;
    ino_t ino;
  };

  Options options_;
  ShimService service_;
  std::unique_ptr<grpc::Server> server_;
  std::optional<FileId> bound_;  // The socket file this server created (after bind).
};

}  // namespace falcon::agent

#endif  // FALCON_AGENT_SHIM_SERVICE_H_
