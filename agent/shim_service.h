// The Shim gRPC service (shim.proto Shim.Attach) on the agent's unix socket: a callback
// (reactor) server that turns each stream into ShimHub events. Writes are queued per stream and
// never block the hub; a shim that stops reading is cut off after `max_queued` messages.
//
// ShimServer owns the socket and the grpc::Server: it binds `<path>.<pid>`, renames it to `<path>`
// and sets the socket's mode (0660) and group. An existing socket file is probed first: when a
// process accepts on it (another agent serves the path) Start fails with kAlreadyExists; when
// nothing answers the stale file is replaced. Shutdown removes the socket file only if it is still
// the one this server bound (same device and inode).
//
// Peer checks (docs/operations.md#shim-socket): the server accepts each connection itself and
// reads the peer's credentials (SO_PEERCRED: the shim process's uid and primary gid). A peer whose
// uid is not the agent's own, root or one of `allowed_uids`, and whose gid is not `group`'s or one
// of `allowed_gids`, is closed before gRPC sees it: one WARNING line (`shim connection refused
// uid=.. gid=.. pid=..`) and a count in falcon_agent_errors_total{where="shim_peer_refused"}. An
// allowed connection is handed to gRPC (AddInsecureChannelFromFd), and each Attach stream tells
// the hub its uid (ShimHub::Open), which keeps a job's ranks to the uid that holds the job.
#ifndef FALCON_AGENT_SHIM_SERVICE_H_
#define FALCON_AGENT_SHIM_SERVICE_H_

#include <grpcpp/grpcpp.h>
#include <sys/types.h>

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "agent/shim_hub.h"
#include "common/error_counter.h"
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
    // Peers allowed besides the agent's own uid, root (uid 0) and members (primary gid) of
    // `group`: by uid, or by primary gid.
    std::vector<uid_t> allowed_uids;
    std::vector<gid_t> allowed_gids;
    // Counts refused peers (where=shim_peer_refused); may be null. Must outlive the server.
    common::ErrorCounter* errors = nullptr;
  };

  // Whether a peer with these credentials may attach under `options` (`own_uid`: the agent's).
  static bool Allowed(const Options& options, uid_t own_uid, gid_t group_gid, uid_t uid, gid_t gid);

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
  // Accepts connections until Shutdown; refuses or hands each to gRPC.
  void AcceptLoop();

  struct FileId {
    dev_t dev;
    ino_t ino;
  };

  Options options_;
  ShimService service_;
  std::unique_ptr<grpc::Server> server_;
  std::optional<FileId> bound_;  // The socket file this server created (after bind).
  gid_t group_gid_ = static_cast<gid_t>(-1);
  int listen_fd_ = -1;
  int wake_[2] = {-1, -1};  // A pipe: written by Shutdown to end AcceptLoop.
  std::thread accept_thread_;
};

}  // namespace falcon::agent

#endif  // FALCON_AGENT_SHIM_SERVICE_H_
