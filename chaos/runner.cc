#include "chaos/runner.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/subprocess.h"

namespace falcon::chaos {
namespace {

// Reads both pipes to their end without letting either fill up.
void Drain(int out_fd, int err_fd, std::string* out, std::string* err) {
  pollfd fds[2] = {{out_fd, POLLIN, 0}, {err_fd, POLLIN, 0}};
  std::string* sinks[2] = {out, err};
  int open = 2;
  char buf[4096];
  while (open > 0) {
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      const ssize_t n = read(fds[i].fd, buf, sizeof(buf));
      if (n > 0) {
        sinks[i]->append(buf, static_cast<size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        fds[i].fd = -1;  // poll ignores negative fds.
        --open;
      }
    }
  }
}

class RealBackground : public BackgroundProcess {
 public:
  explicit RealBackground(common::Subprocess p) : p_(std::move(p)) {}
  int pid() const override { return p_.pid(); }
  absl::Status Stop() override {
    absl::StatusOr<common::ExitStatus> s = p_.Stop(SIGTERM, absl::Seconds(2));
    return s.status();
  }

 private:
  common::Subprocess p_;
};

class RealRunner : public Runner {
 public:
  absl::StatusOr<CommandResult> Run(const std::vector<std::string>& argv) override {
    common::SpawnOptions o;
    o.argv = argv;
    o.search_path = true;
    o.stdin_stream = common::Stdio::Null();
    o.stdout_stream = common::Stdio::Pipe();
    o.stderr_stream = common::Stdio::Pipe();
    absl::StatusOr<common::Subprocess> p = common::Subprocess::Spawn(o);
    if (!p.ok()) return p.status();
    CommandResult r;
    Drain(p->stdout_fd(), p->stderr_fd(), &r.stdout_text, &r.stderr_text);
    absl::StatusOr<common::ExitStatus> exit = p->Wait();
    if (!exit.ok()) return exit.status();
    r.exit_code = exit->ShellCode();
    return r;
  }

  absl::StatusOr<std::string> ReadFile(const std::string& path) override {
    const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat("read ", path));
    std::string out;
    char buf[4096];
    for (;;) {
      const ssize_t n = read(fd, buf, sizeof(buf));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        const int err = errno;
        close(fd);
        return absl::ErrnoToStatus(err, absl::StrCat("read ", path));
      }
      if (n == 0) break;
      out.append(buf, static_cast<size_t>(n));
      if (out.size() > (1 << 20)) break;  // /proc and cgroup files are small.
    }
    close(fd);
    return out;
  }

  absl::Status WriteFile(const std::string& path, const std::string& contents) override {
    const int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat("write ", path));
    ssize_t n;
    do {
      n = write(fd, contents.data(), contents.size());
    } while (n < 0 && errno == EINTR);
    const int err = errno;
    close(fd);
    if (n < 0) return absl::ErrnoToStatus(err, absl::StrCat("write ", path));
    if (static_cast<size_t>(n) != contents.size()) {
      return absl::InternalError(absl::StrCat("write ", path, ": short write"));
    }
    return absl::OkStatus();
  }

  bool Exists(const std::string& path) override {
    struct stat st;
    return stat(path.c_str(), &st) == 0;
  }

  absl::Status MakeDir(const std::string& path) override {
    if (mkdir(path.c_str(), 0755) != 0) {
      return absl::ErrnoToStatus(errno, absl::StrCat("mkdir ", path));
    }
    return absl::OkStatus();
  }

  absl::Status RemoveDir(const std::string& path) override {
    if (rmdir(path.c_str()) != 0) return absl::ErrnoToStatus(errno, absl::StrCat("rmdir ", path));
    return absl::OkStatus();
  }

  absl::StatusOr<std::vector<std::string>> ListDir(const std::string& path) override {
    DIR* dir = opendir(path.c_str());
    if (dir == nullptr) return absl::ErrnoToStatus(errno, absl::StrCat("list ", path));
    std::vector<std::string> names;
    while (dirent* e = readdir(dir)) {
      const std::string name = e->d_name;
      if (name != "." && name != "..") names.push_back(name);
    }
    closedir(dir);
    std::sort(names.begin(), names.end());
    return names;
  }

  absl::StatusOr<std::unique_ptr<BackgroundProcess>> Spawn(
      const std::vector<std::string>& argv) override {
    common::SpawnOptions o;
    o.argv = argv;
    o.search_path = true;
    o.new_process_group = true;
    o.parent_death_signal = SIGKILL;
    o.stdin_stream = common::Stdio::Null();
    o.stdout_stream = common::Stdio::Null();
    o.stderr_stream = common::Stdio::Null();
    absl::StatusOr<common::Subprocess> p = common::Subprocess::Spawn(o);
    if (!p.ok()) return p.status();
    return std::unique_ptr<BackgroundProcess>(new RealBackground(*std::move(p)));
  }

  void Sleep(absl::Duration d) override { absl::SleepFor(d); }
};

}  // namespace

std::unique_ptr<Runner> NewRealRunner() { return std::make_unique<RealRunner>(); }

}  // namespace falcon::chaos
