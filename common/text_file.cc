#include "common/text_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace falcon::common {
namespace {

absl::Status OpenError(const std::string& path, int err) {
  const std::string message = absl::StrCat(path, ": cannot open file (", std::strerror(err), ")");
  if (err == ENOENT || err == ENOTDIR) return absl::NotFoundError(message);
  if (err == EACCES || err == EPERM) return absl::PermissionDeniedError(message);
  return absl::UnknownError(message);
}

}  // namespace

absl::StatusOr<std::string> ReadTextFile(const std::string& path, uint64_t max_bytes,
                                         absl::string_view limit_name) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return OpenError(path, errno);
  struct stat st;
  if (::fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
    ::close(fd);
    return absl::InvalidArgumentError(absl::StrCat(path, ": is a directory, not a file"));
  }
  std::string out;
  // A regular file's size is known up front: refuse it before reading anything.
  bool too_large = S_ISREG(st.st_mode) && static_cast<uint64_t>(st.st_size) > max_bytes;
  if (!too_large && S_ISREG(st.st_mode)) out.reserve(static_cast<size_t>(st.st_size));
  char buffer[1 << 16];
  while (!too_large) {
    const ssize_t n = ::read(fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      if (err == EISDIR) {
        return absl::InvalidArgumentError(absl::StrCat(path, ": is a directory, not a file"));
      }
      return absl::UnknownError(absl::StrCat(path, ": read error (", std::strerror(err), ")"));
    }
    if (n == 0) break;
    if (out.size() + static_cast<uint64_t>(n) > max_bytes) {
      too_large = true;
      break;
    }
    out.append(buffer, static_cast<size_t>(n));
  }
  ::close(fd);
  if (too_large) {
    return absl::ResourceExhaustedError(
        absl::StrCat(path, ": larger than the limit of ", max_bytes, " bytes",
                     limit_name.empty() ? "" : absl::StrCat(" (", limit_name, ")")));
  }
  return out;
}

}  // namespace falcon::common

namespace falcon::common {

absl::Status WriteTextFileAtomically(const std::string& path, absl::string_view contents) {
  const std::string tmp = absl::StrCat(path, ".tmp.", ::getpid());
  auto fail = [&](absl::string_view what) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return absl::InternalError(
        absl::StrCat(path, ": cannot ", what, " (", std::strerror(err), ")"));
  };
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return fail("create its temporary file");
  size_t done = 0;
  while (done < contents.size()) {
    const ssize_t n = ::write(fd, contents.data() + done, contents.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      ::close(fd);
      return fail("write its temporary file");
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) {
    ::close(fd);
    return fail("sync its temporary file");
  }
  if (::close(fd) != 0) return fail("close its temporary file");
  if (::rename(tmp.c_str(), path.c_str()) != 0) return fail("rename its temporary file over it");
  return absl::OkStatus();
}

}  // namespace falcon::common
