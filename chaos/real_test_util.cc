#include "chaos/real_test_util.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "common/proc_stats.h"

namespace falcon::chaos {
namespace {

constexpr char kPrefix[] = "fcrt";

absl::Status Errno(absl::string_view what) { return absl::ErrnoToStatus(errno, what); }

// Runs `fn` with the calling thread inside network namespace `netns` (/var/run/netns/NETNS).
template <typename Fn>
absl::Status InNetns(const std::string& netns, Fn fn) {
  const int self = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
  if (self < 0) return Errno("open /proc/thread-self/ns/net");
  const std::string path = "/var/run/netns/" + netns;
  const int target = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (target < 0) {
    const absl::Status s = Errno("open " + path);
    close(self);
    return s;
  }
  absl::Status s;
  if (setns(target, CLONE_NEWNET) != 0) {
    s = Errno("setns " + path);
  } else {
    s = fn();
    if (setns(self, CLONE_NEWNET) != 0) s = Errno("setns back to this thread's namespace");
  }
  close(target);
  close(self);
  return s;
}

sockaddr_in Address(const std::string& ip, uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  inet_pton(AF_INET, ip.c_str(), &a.sin_addr);
  return a;
}

}  // namespace

absl::Status VethNamespaces::Run(const std::vector<std::string>& argv) {
  absl::StatusOr<CommandResult> r = runner_->Run(argv);
  if (!r.ok()) return r.status();
  if (r->exit_code != 0) {
    return absl::InternalError(absl::StrCat(absl::StrJoin(argv, " "), ": exit ", r->exit_code, ": ",
                                            absl::StripAsciiWhitespace(r->stderr_text)));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<VethNamespaces>> VethNamespaces::Create(Runner* runner) {
  // Leftovers of killed runs: namespaces fcrtPID-nodeN whose PID is gone.
  absl::StatusOr<CommandResult> list = runner->Run({"ip", "netns", "list"});
  if (!list.ok()) return list.status();
  for (absl::string_view line : absl::StrSplit(list->stdout_text, '\n', absl::SkipEmpty())) {
    const std::string name(line.substr(0, line.find(' ')));
    absl::string_view rest = name;
    int pid = 0;
    if (!absl::ConsumePrefix(&rest, kPrefix)) continue;
    const size_t dash = rest.find("-node");
    if (dash == absl::string_view::npos || !absl::SimpleAtoi(rest.substr(0, dash), &pid)) continue;
    if (pid != getpid() && kill(pid, 0) != 0 && errno == ESRCH) {
      (void)runner->Run({"ip", "netns", "del", name});
    }
  }

  const std::string p = absl::StrCat(kPrefix, getpid());
  cluster::ClusterSpec c;
  c.kind = cluster::ClusterKind::kNetns;
  c.prefix = p;
  c.subnet = "10.213.0.0/24";
  c.controller_address = "10.213.0.254";
  c.nodes = {{"node0", p + "-node0", "10.213.0.1", p + "a", p + "h0"},
             {"node1", p + "-node1", "10.213.0.2", p + "b", p + "h1"}};
  std::unique_ptr<VethNamespaces> v(new VethNamespaces(runner, c));
  std::vector<std::vector<std::string>> steps = {
      {"ip", "netns", "add", c.nodes[0].netns},
      {"ip", "netns", "add", c.nodes[1].netns},
      {"ip", "-n", c.nodes[0].netns, "link", "add", c.nodes[0].iface, "type", "veth", "peer",
       "name", c.nodes[1].iface, "netns", c.nodes[1].netns}};
  for (const cluster::NodeSpec& n : c.nodes) {
    steps.push_back({"ip", "-n", n.netns, "addr", "add", n.address + "/24", "dev", n.iface});
    steps.push_back({"ip", "-n", n.netns, "link", "set", n.iface, "up"});
    steps.push_back({"ip", "-n", n.netns, "link", "set", "lo", "up"});
  }
  for (const std::vector<std::string>& step : steps) {
    if (absl::Status s = v->Run(step); !s.ok()) return s;  // The destructor cleans up.
  }
  return v;
}

VethNamespaces::~VethNamespaces() {
  for (const cluster::NodeSpec& n : cluster_.nodes) {
    (void)runner_->Run({"ip", "netns", "del", n.netns});
  }
}

absl::StatusOr<double> TcpThroughput(const std::string& from_netns, const std::string& to_netns,
                                     const std::string& to_address, absl::Duration window) {
  int listener = -1, sender = -1;
  absl::Status s = InNetns(to_netns, [&]() -> absl::Status {
    listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (listener < 0) return Errno("socket");
    const sockaddr_in a = Address(to_address, 0);
    if (bind(listener, reinterpret_cast<const sockaddr*>(&a), sizeof(a)) != 0) {
      return Errno("bind " + to_address);
    }
    if (listen(listener, 1) != 0) return Errno("listen");
    return absl::OkStatus();
  });
  if (s.ok()) {
    s = InNetns(from_netns, [&]() -> absl::Status {
      sender = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      return sender < 0 ? Errno("socket") : absl::OkStatus();
    });
  }
  sockaddr_in bound{};
  socklen_t len = sizeof(bound);
  if (s.ok() && getsockname(listener, reinterpret_cast<sockaddr*>(&bound), &len) != 0) {
    s = Errno("getsockname");
  }
  if (s.ok()) {
    const sockaddr_in a = Address(to_address, ntohs(bound.sin_port));
    if (connect(sender, reinterpret_cast<const sockaddr*>(&a), sizeof(a)) != 0) {
      s = Errno("connect " + to_address);
    }
  }
  const int receiver = s.ok() ? accept4(listener, nullptr, nullptr, SOCK_CLOEXEC) : -1;
  if (s.ok() && receiver < 0) s = Errno("accept");
  if (!s.ok()) {
    if (listener >= 0) close(listener);
    if (sender >= 0) close(sender);
    return s;
  }
  const timeval tick = {0, 100'000};
  setsockopt(receiver, SOL_SOCKET, SO_RCVTIMEO, &tick, sizeof(tick));

  std::atomic<bool> stop{false};
  std::thread send_thread([&] {
    std::vector<char> buf(64 << 10, 'x');
    while (!stop.load()) {
      if (send(sender, buf.data(), buf.size(), MSG_NOSIGNAL) < 0 && errno != EINTR) break;
    }
  });
  std::vector<char> buf(256 << 10);
  int64_t bytes = 0;
  absl::Time start = absl::InfinitePast();
  const absl::Time begun = absl::Now();
  absl::Time now = begun;
  for (;;) {
    const ssize_t n = recv(receiver, buf.data(), buf.size(), 0);
    now = absl::Now();
    if (n > 0) {
      if (start == absl::InfinitePast()) {
        start = now;  // Count from the first byte on, not the connection set-up.
      } else {
        bytes += n;
      }
    } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
      s = Errno("recv");
      break;
    }
    if (start != absl::InfinitePast() && now - start >= window) break;
    if (start == absl::InfinitePast() && now - begun > window * 10) break;
  }
  stop = true;
  shutdown(sender, SHUT_RDWR);
  shutdown(receiver, SHUT_RDWR);
  send_thread.join();
  close(sender);
  close(receiver);
  close(listener);
  if (!s.ok()) return s;
  if (start == absl::InfinitePast()) return absl::DeadlineExceededError("no byte arrived");
  return static_cast<double>(bytes) / absl::ToDoubleSeconds(now - start);
}

absl::StatusOr<common::Subprocess> SpawnBusyLoop(std::vector<int> cpus) {
  common::SpawnOptions o;
  o.name = "busy-loop";
  o.parent_death_signal = SIGKILL;
  o.cpus = std::move(cpus);
  return common::Subprocess::SpawnFunction(o, [] {
    setpriority(PRIO_PROCESS, 0, 0);  // Root may lower a niceness; elsewhere it stays.
    volatile uint64_t spins = 0;
    for (;;) spins = spins + 1;
    return 0;
  });
}

absl::StatusOr<double> CpuShare(int pid, absl::Duration window) {
  absl::StatusOr<double> c0 = common::ProcessCpuSeconds(pid);
  if (!c0.ok()) return c0.status();
  const absl::Time t0 = absl::Now();
  absl::SleepFor(window);
  absl::StatusOr<double> c1 = common::ProcessCpuSeconds(pid);
  if (!c1.ok()) return c1.status();
  return (*c1 - *c0) / absl::ToDoubleSeconds(absl::Now() - t0);
}

}  // namespace falcon::chaos
