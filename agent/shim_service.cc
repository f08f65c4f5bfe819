#include "agent/shim_service.h"

#include <fcntl.h>
#include <glog/logging.h>
#include <grp.h>
#include <grpcpp/server_posix.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <deque>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "agent/agent_metrics_table.h"
#include "proto/grpc_util.h"

namespace falcon::agent {
namespace {

// True when a process accepts connections on the unix socket at `path` (another agent serves it);
// false when nothing answers (a stale file left by an agent that did not exit cleanly).
bool SomeoneListens(const std::string& path) {
  sockaddr_un addr{};
  if (path.size() >= sizeof(addr.sun_path)) return false;  // Binding fails later, naming it.
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.data(), path.size());
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  const bool answered = connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0;
  close(fd);
  return answered;
}

// The credentials of the process at the other end of unix socket `fd`; nullopt when unknown.
std::optional<ucred> PeerCredentials(int fd) {
  ucred cred{};
  socklen_t len = sizeof(cred);
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || len != sizeof(cred)) {
    return std::nullopt;
  }
  return cred;
}

// The uid of an Attach stream's peer: ShimServer hands gRPC each connection by its fd, and gRPC
// names such a peer "fd:<n>" (the fd stays open while the stream lives). kUnknownUid otherwise.
uid_t StreamUid(const grpc::CallbackServerContext& context) {
  const std::string peer = context.peer();
  int fd = -1;
  if (!absl::StartsWith(peer, "fd:") || !absl::SimpleAtoi(peer.substr(3), &fd)) {
    return ShimHub::kUnknownUid;
  }
  std::optional<ucred> cred = PeerCredentials(fd);
  return cred.has_value() ? cred->uid : ShimHub::kUnknownUid;
}

// One Attach stream. Lives until OnDone; the hub stops using it in OnClosed (called from OnDone).
class AttachReactor final : public grpc::ServerBidiReactor<v1::ShimMessage, v1::AgentToShim>,
                            public ShimStream {
 public:
  AttachReactor(ShimHub* hub, size_t max_queued, uid_t uid) : hub_(hub), max_queued_(max_queued) {
    id_ = hub_->Open(this, uid);
    StartRead(&in_);
  }

  void Send(const v1::AgentToShim& msg) override {
    absl::MutexLock lock(&mu_);
    if (finish_requested_) return;
    if (out_.size() >= max_queued_) {
      RequestFinishLocked(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                                       "shim is not reading: send queue full"));
      return;
    }
    out_.push_back(msg);
    if (!writing_) {
      writing_ = true;
      StartWrite(&out_.front());
    }
  }

  void Close(const absl::Status& status) override {
    absl::MutexLock lock(&mu_);
    RequestFinishLocked(proto::ToGrpcStatus(status));
  }

  void OnReadDone(bool ok) override {
    if (!ok) {  // The shim half-closed, or the stream broke.
      Close(absl::OkStatus());
      return;
    }
    hub_->OnMessage(id_, in_);
    absl::MutexLock lock(&mu_);
    if (!finish_requested_) StartRead(&in_);
  }

  void OnWriteDone(bool ok) override {
    absl::MutexLock lock(&mu_);
    out_.pop_front();
    if (!ok) out_.clear();  // No later write can succeed.
    if (!out_.empty() && !finish_called_) {
      StartWrite(&out_.front());
      return;
    }
    writing_ = false;
    if (finish_requested_ && !finish_called_) {
      finish_called_ = true;
      Finish(finish_status_);
    }
  }

  void OnCancel() override { Close(absl::CancelledError("stream cancelled")); }

  void OnDone() override {
    hub_->OnClosed(id_);
    delete this;
  }

 private:
  // Finishes once queued writes are out. gRPC never runs reactions inline from Start*/Finish,
  // so calling them with mu_ held cannot re-enter this object.
  void RequestFinishLocked(grpc::Status status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finish_requested_) return;
    finish_requested_ = true;
    finish_status_ = std::move(status);
    if (!writing_) {
      finish_called_ = true;
      Finish(finish_status_);
    }
  }

  ShimHub* const hub_;
  const size_t max_queued_;
  uint64_t id_ = 0;
  v1::ShimMessage in_;
  absl::Mutex mu_;
  std::deque<v1::AgentToShim> out_ ABSL_GUARDED_BY(mu_);  // Front is being written.
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool finish_requested_ ABSL_GUARDED_BY(mu_) = false;
  bool finish_called_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status finish_status_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

grpc::ServerBidiReactor<v1::ShimMessage, v1::AgentToShim>* ShimService::Attach(
    grpc::CallbackServerContext* context) {
  return new AttachReactor(hub_, max_queued_, StreamUid(*context));
}

bool ShimServer::Allowed(const Options& options, uid_t own_uid, gid_t group_gid, uid_t uid,
                         gid_t gid) {
  if (uid == own_uid || uid == 0) return true;
  if (group_gid != static_cast<gid_t>(-1) && gid == group_gid) return true;
  for (uid_t u : options.allowed_uids) {
    if (u == uid) return true;
  }
  for (gid_t g : options.allowed_gids) {
    if (g == gid) return true;
  }
  return false;
}

void ShimServer::AcceptLoop() {
  for (;;) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_[0], POLLIN, 0}};
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      LOG(ERROR) << "shim socket poll failed socket=" << options_.socket_path << " error=\""
                 << std::strerror(errno) << "\"; no more shims are accepted";
      return;
    }
    if (fds[1].revents != 0) return;  // Shutdown.
    if ((fds[0].revents & POLLIN) == 0) continue;
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) continue;  // The peer went away (ECONNABORTED), or EAGAIN: poll again.
    std::optional<ucred> cred = PeerCredentials(fd);
    if (!cred.has_value() || !Allowed(options_, geteuid(), group_gid_, cred->uid, cred->gid)) {
      LOG(WARNING) << "shim connection refused socket=" << options_.socket_path
                   << " uid=" << (cred ? absl::StrCat(cred->uid) : "?")
                   << " gid=" << (cred ? absl::StrCat(cred->gid) : "?")
                   << " pid=" << (cred ? absl::StrCat(cred->pid) : "?") << " allowed=\"uid "
                   << geteuid() << ",0" << (options_.allowed_uids.empty() ? "" : ",")
                   << absl::StrJoin(options_.allowed_uids, ",") << "; gid "
                   << (group_gid_ == static_cast<gid_t>(-1) ? "-" : absl::StrCat(group_gid_))
                   << (options_.allowed_gids.empty() ? "" : ",")
                   << absl::StrJoin(options_.allowed_gids, ",") << "\"";
      if (options_.errors != nullptr) options_.errors->CountError(metric::where::kShimPeerRefused);
      close(fd);
      continue;
    }
    grpc::AddInsecureChannelFromFd(server_.get(), fd);  // gRPC owns and closes it.
  }
}

absl::StatusOr<std::unique_ptr<ShimServer>> ShimServer::Start(const Options& options,
                                                              ShimHub* hub) {
  gid_t gid = static_cast<gid_t>(-1);
  if (!options.group.empty()) {
    struct group* g = getgrnam(options.group.c_str());
    if (g == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("socket_group: no group named '", options.group, "'"));
    }
    gid = g->gr_gid;
  }
  struct stat st;
  if (lstat(options.socket_path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      return absl::FailedPreconditionError(
          absl::StrCat("socket: ", options.socket_path, " exists and is not a socket"));
    }
    if (SomeoneListens(options.socket_path)) {
      return absl::AlreadyExistsError(
          absl::StrCat("socket: another agent is serving ", options.socket_path));
    }
    unlink(options.socket_path.c_str());  // Left behind by an agent that did not exit cleanly.
  }
  std::unique_ptr<ShimServer> server(new ShimServer(options, hub));
  server->group_gid_ = gid;
  // Bind a path of this process's own and rename the socket into place, so that Shutdown removes
  // the public path only while it is ours.
  std::string bind_path = absl::StrCat(options.socket_path, ".", getpid());
  sockaddr_un addr{};
  if (bind_path.size() >= sizeof(addr.sun_path)) bind_path = options.socket_path;
  if (bind_path.size() >= sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError(
        absl::StrCat("socket: ", options.socket_path, " is longer than a unix socket path"));
  }
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, bind_path.data(), bind_path.size());
  server->listen_fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (server->listen_fd_ < 0 || pipe2(server->wake_, O_CLOEXEC) != 0) {
    return absl::UnavailableError(absl::StrCat("socket: ", std::strerror(errno)));
  }
  unlink(bind_path.c_str());  // A stale private path of an earlier process with this pid.
  if (bind(server->listen_fd_, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0 ||
      listen(server->listen_fd_, 128) != 0) {
    return absl::UnavailableError(
        absl::StrCat("socket: cannot listen on ", bind_path, ": ", std::strerror(errno)));
  }
  if (bind_path != options.socket_path &&
      std::rename(bind_path.c_str(), options.socket_path.c_str()) != 0) {
    const int err = errno;
    unlink(bind_path.c_str());
    return absl::UnavailableError(absl::StrCat("socket: rename ", bind_path, " to ",
                                               options.socket_path, ": ", std::strerror(err)));
  }
  if (lstat(options.socket_path.c_str(), &st) == 0) {
    server->bound_ = FileId{st.st_dev, st.st_ino};
  }
  if (chmod(options.socket_path.c_str(), options.mode) != 0) {
    return absl::PermissionDeniedError(
        absl::StrCat("socket: chmod ", options.socket_path, ": ", std::strerror(errno)));
  }
  if (gid != static_cast<gid_t>(-1) &&
      chown(options.socket_path.c_str(), static_cast<uid_t>(-1), gid) != 0) {
    return absl::PermissionDeniedError(
        absl::StrCat("socket_group: chown ", options.socket_path, ": ", std::strerror(errno)));
  }
  grpc::ServerBuilder builder;  // No listening port: AcceptLoop hands it each connection.
  builder.SetMaxReceiveMessageSize(64 << 20);
  builder.RegisterService(&server->service_);
  server->server_ = builder.BuildAndStart();
  if (server->server_ == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("socket: cannot start the gRPC server of ", options.socket_path));
  }
  ShimServer* raw = server.get();
  server->accept_thread_ = std::thread([raw] { raw->AcceptLoop(); });
  return server;
}

void ShimServer::Shutdown(absl::Duration grace) {
  if (accept_thread_.joinable()) {
    const char byte = 0;
    if (write(wake_[1], &byte, 1) != 1) PLOG(ERROR) << "shim socket: cannot stop accepting";
    accept_thread_.join();
  }
  for (int* fd : {&listen_fd_, &wake_[0], &wake_[1]}) {
    if (*fd >= 0) close(*fd);
    *fd = -1;
  }
  if (server_ == nullptr) return;
  server_->Shutdown(absl::ToChronoTime(absl::Now() + grace));
  server_->Wait();
  server_.reset();
  // Remove the socket file only while it is still the one this server bound: after it was
  // replaced (by hand, then another agent started on the path) it belongs to someone else.
  struct stat st;
  if (bound_.has_value() && lstat(options_.socket_path.c_str(), &st) == 0 &&
      st.st_dev == bound_->dev && st.st_ino == bound_->ino) {
    unlink(options_.socket_path.c_str());
  }
}

ShimServer::~ShimServer() { Shutdown(absl::ZeroDuration()); }

}  // namespace falcon::agent
