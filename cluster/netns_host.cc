#include "cluster/netns_host.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/text_file.h"

namespace falcon::cluster {
namespace {

// Owns a file descriptor.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  Fd& operator=(Fd&& o) noexcept {
    std::swap(fd_, o.fd_);
    return *this;
  }
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_ = -1;
};

std::string Where(const std::string& netns) {
  return netns.empty() ? std::string("this process's namespace") : netns;
}

absl::Status Errno(int err, absl::string_view what) {
  return absl::ErrnoToStatus(err, std::string(what));
}

// A non-blocking socket of `netns`, owned.
absl::StatusOr<Fd> NonBlockingSocketIn(const std::string& netns) {
  absl::StatusOr<int> fd = TcpSocketIn(netns);
  if (!fd.ok()) return fd.status();
  Fd owned(*fd);
  const int flags = fcntl(owned.get(), F_GETFL);
  if (flags < 0 || fcntl(owned.get(), F_SETFL, flags | O_NONBLOCK) != 0) {
    return Errno(errno, "fcntl O_NONBLOCK");
  }
  return owned;
}

// Waits until `fd` is ready for `events`; kDeadlineExceeded naming `what` after `timeout`.
absl::Status Await(int fd, short events, absl::Duration timeout, const std::string& what) {
  const absl::Time deadline = absl::Now() + timeout;
  for (;;) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      return absl::DeadlineExceededError(
          absl::StrCat(what, " timed out after ", absl::FormatDuration(timeout)));
    }
    pollfd p{fd, events, 0};
    const int rc = poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(left)) + 1);
    if (rc > 0) return absl::OkStatus();
    if (rc < 0 && errno != EINTR) return Errno(errno, absl::StrCat(what, ": poll"));
  }
}

absl::Status SendByte(int fd, absl::Duration timeout, const std::string& what) {
  const char byte = 'f';
  for (;;) {
    if (send(fd, &byte, 1, MSG_NOSIGNAL) == 1) return absl::OkStatus();
    if (errno != EAGAIN && errno != EINTR) return Errno(errno, what);
    if (absl::Status s = Await(fd, POLLOUT, timeout, what); !s.ok()) return s;
  }
}

absl::Status ReceiveByte(int fd, absl::Duration timeout, const std::string& what) {
  char byte;
  for (;;) {
    if (absl::Status s = Await(fd, POLLIN, timeout, what); !s.ok()) return s;
    const ssize_t n = recv(fd, &byte, 1, 0);
    if (n == 1) return absl::OkStatus();
    if (n == 0) return absl::UnavailableError(absl::StrCat(what, ": connection closed"));
    if (errno != EAGAIN && errno != EINTR) return Errno(errno, what);
  }
}

class SystemHost final : public NetnsHost {
 public:
  absl::StatusOr<common::CommandResult> Run(const std::vector<std::string>& argv) override {
    common::CommandOptions o;
    o.argv = argv;
    if (!o.argv.empty() && o.argv[0] == "ip") o.argv[0] = IpBinary();
    o.timeout = absl::Seconds(30);
    return common::RunCommand(o);
  }

  absl::Status ProbeTcp(const std::string& connect_netns, const std::string& listen_netns,
                        const std::string& listen_address, absl::Duration timeout) override {
    const std::string from = Where(connect_netns);
    const std::string to = Where(listen_netns);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    if (inet_pton(AF_INET, listen_address.c_str(), &addr.sin_addr) != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", listen_address, "' is not an IPv4 address"));
    }
    absl::StatusOr<Fd> listener = NonBlockingSocketIn(listen_netns);
    if (!listener.ok()) return listener.status();
    const std::string listen_what = absl::StrCat("listen on ", listen_address, " in ", to);
    if (bind(listener->get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
        listen(listener->get(), 1) != 0) {
      return Errno(errno, listen_what);
    }
    socklen_t len = sizeof(addr);
    if (getsockname(listener->get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      return Errno(errno, listen_what);
    }
    const std::string target = absl::StrCat(listen_address, ":", ntohs(addr.sin_port));
    const std::string what = absl::StrCat("TCP from ", from, " to ", target, " in ", to);

    absl::StatusOr<Fd> client = NonBlockingSocketIn(connect_netns);
    if (!client.ok()) return client.status();
    if (connect(client->get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 &&
        errno != EINPROGRESS) {
      return absl::UnavailableError(absl::StrCat(what, ": connect: ", std::strerror(errno)));
    }
    if (absl::Status s = Await(client->get(), POLLOUT, timeout, absl::StrCat(what, ": connect"));
        !s.ok()) {
      return s;
    }
    int err = 0;
    len = sizeof(err);
    if (getsockopt(client->get(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
    if (err != 0) {
      return absl::UnavailableError(absl::StrCat(what, ": connect: ", std::strerror(err)));
    }
    if (absl::Status s = Await(listener->get(), POLLIN, timeout, absl::StrCat(what, ": accept"));
        !s.ok()) {
      return s;
    }
    Fd server(accept4(listener->get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (server.get() < 0) return Errno(errno, absl::StrCat(what, ": accept"));
    if (absl::Status s = SendByte(client->get(), timeout, absl::StrCat(what, ": send")); !s.ok()) {
      return s;
    }
    if (absl::Status s = ReceiveByte(server.get(), timeout, absl::StrCat(what, ": receive"));
        !s.ok()) {
      return s;
    }
    if (absl::Status s = SendByte(server.get(), timeout, absl::StrCat(what, ": reply")); !s.ok()) {
      return s;
    }
    return ReceiveByte(client->get(), timeout, absl::StrCat(what, ": receive reply"));
  }

  bool ProcessAlive(pid_t pid) override { return pid > 0 && (kill(pid, 0) == 0 || errno == EPERM); }

  absl::StatusOr<std::string> ReadFile(const std::string& path) override {
    return common::ReadTextFile(path, uint64_t{1} << 20);
  }
};


}  // namespace

absl::StatusOr<int> TcpSocketIn(const std::string& netns) {
  constexpr int kType = SOCK_STREAM | SOCK_CLOEXEC;
  if (netns.empty()) {
    const int fd = socket(AF_INET, kType, 0);
    if (fd < 0) return Errno(errno, "socket");
    return fd;
  }
  // setns(CLONE_NEWNET) changes only the calling thread's namespace, and a socket stays in the
  // namespace it was made in.
  const std::string path = absl::StrCat(kNetnsRunDir, "/", netns);
  absl::Status status;
  int fd = -1;
  std::thread entering([&] {
    const int ns = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (ns < 0) {
      status = Errno(errno, absl::StrCat("cannot open ", path));
      return;
    }
    if (setns(ns, CLONE_NEWNET) != 0) {
      status = Errno(errno, absl::StrCat("cannot enter network namespace ", netns));
    } else {
      fd = socket(AF_INET, kType, 0);
      if (fd < 0) status = Errno(errno, absl::StrCat("socket in ", netns));
    }
    close(ns);
  });
  entering.join();
  if (!status.ok()) return status;
  return fd;
}

std::shared_ptr<NetnsHost> SystemNetnsHost() { return std::make_shared<SystemHost>(); }

}  // namespace falcon::cluster
