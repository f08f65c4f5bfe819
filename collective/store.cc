#include "collective/store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"

namespace falcon::collective {
namespace {

absl::Status MakeDirs(const std::string& dir) {
  std::string path;
  for (size_t i = 0; i <= dir.size(); ++i) {
    if (i == dir.size() || (dir[i] == '/' && i > 0)) {
      path = dir.substr(0, i);
      if (mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) {
        return absl::UnavailableError(
            absl::StrCat("rendezvous: cannot create '", path, "': ", std::strerror(errno)));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::shared_ptr<RendezvousStore>> RendezvousStore::Open(const std::string& dir) {
  if (dir.empty()) return absl::InvalidArgumentError("rendezvous: empty store directory");
  if (auto s = MakeDirs(dir); !s.ok()) return s;
  if (access(dir.c_str(), W_OK | X_OK) != 0) {
    return absl::UnavailableError(absl::StrCat("rendezvous: '", dir, "' is not writable"));
  }
  return std::shared_ptr<RendezvousStore>(new RendezvousStore(dir));
}

std::string RendezvousStore::PathOf(absl::string_view key) const {
  std::string name = "k.";
  for (unsigned char c : key) {
    if (isalnum(c) || c == '_' || c == '-' || c == '.') {
      name.push_back(static_cast<char>(c));
    } else {
      absl::StrAppendFormat(&name, "%%%02x", c);
    }
  }
  return absl::StrCat(dir_, "/", name);
}

absl::Status RendezvousStore::Set(absl::string_view key, absl::string_view value) const {
  const std::string path = PathOf(key);
  std::string tmp = absl::StrCat(dir_, "/tmp.XXXXXX");
  const int fd = mkstemp(tmp.data());
  if (fd < 0) {
    return absl::UnavailableError(absl::StrCat("rendezvous: cannot write key '", key, "' in '",
                                               dir_, "': ", std::strerror(errno)));
  }
  size_t done = 0;
  while (done < value.size()) {
    const ssize_t n = write(fd, value.data() + done, value.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = errno;
      close(fd);
      unlink(tmp.c_str());
      return absl::UnavailableError(
          absl::StrCat("rendezvous: cannot write key '", key, "': ", std::strerror(err)));
    }
    done += static_cast<size_t>(n);
  }
  fchmod(fd, 0644);
  close(fd);
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    unlink(tmp.c_str());
    return absl::UnavailableError(
        absl::StrCat("rendezvous: cannot publish key '", key, "': ", std::strerror(err)));
  }
  return absl::OkStatus();
}

bool RendezvousStore::Has(absl::string_view key) const {
  return access(PathOf(key).c_str(), F_OK) == 0;
}

absl::Status RendezvousStore::Wait(const std::vector<std::string>& keys,
                                   absl::Duration timeout) const {
  const absl::Time deadline = absl::Now() + timeout;
  absl::Duration poll = absl::Microseconds(100);
  for (const std::string& key : keys) {
    while (!Has(key)) {
      if (absl::Now() >= deadline) {
        return absl::DeadlineExceededError(absl::StrCat(
            "rendezvous: key '", key, "' not set within ", absl::FormatDuration(timeout), " in '",
            dir_, "' (a rank did not arrive)"));
      }
      absl::SleepFor(poll);
      poll = std::min(poll * 2, absl::Milliseconds(5));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> RendezvousStore::Get(absl::string_view key,
                                                 absl::Duration timeout) const {
  if (auto s = Wait({std::string(key)}, timeout); !s.ok()) return s;
  std::ifstream in(PathOf(key), std::ios::binary);
  if (!in) return absl::UnavailableError(absl::StrCat("rendezvous: cannot read key '", key, "'"));
  std::stringstream data;
  data << in.rdbuf();
  return data.str();
}

}  // namespace falcon::collective
