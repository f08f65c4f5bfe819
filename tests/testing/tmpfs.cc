#include "tests/testing/tmpfs.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace falcon::tests::testing {

absl::StatusOr<std::unique_ptr<Tmpfs>> Tmpfs::Mount(const std::string& dir, uint64_t bytes) {
  if (mkdir(dir.c_str(), 0755) != 0) {
    return absl::FailedPreconditionError(absl::StrCat("mkdir ", dir, ": ", strerror(errno)));
  }
  const std::string data = absl::StrCat("size=", bytes, ",mode=0755");
  if (mount("tmpfs", dir.c_str(), "tmpfs", 0, data.c_str()) != 0) {
    const int err = errno;
    rmdir(dir.c_str());
    return absl::FailedPreconditionError(
        absl::StrCat("mount -t tmpfs on ", dir, ": ", strerror(err)));
  }
  return std::unique_ptr<Tmpfs>(new Tmpfs(dir));
}

Tmpfs::~Tmpfs() {
  umount2(path_.c_str(), MNT_DETACH);
  rmdir(path_.c_str());
}

uint64_t Tmpfs::free_bytes() const {
  struct statvfs st;
  if (statvfs(path_.c_str(), &st) != 0) return 0;
  return static_cast<uint64_t>(st.f_bavail) * st.f_frsize;
}

absl::StatusOr<uint64_t> Tmpfs::Fill(const std::string& name) {
  const std::string file = absl::StrCat(path_, "/", name);
  int fd = open(file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return absl::UnavailableError(absl::StrCat("open ", file, ": ", strerror(errno)));
  uint64_t written = 0;
  std::vector<char> chunk(1 << 20, 'f');
  for (size_t size = chunk.size(); size > 0;) {
    ssize_t n = write(fd, chunk.data(), size);
    if (n > 0) {
      written += static_cast<uint64_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno != ENOSPC) {
      const int err = errno;
      close(fd);
      return absl::UnavailableError(absl::StrCat("write ", file, ": ", strerror(err)));
    }
    size /= 2;  // Full at this size: try smaller writes until not even a byte fits.
  }
  close(fd);
  return written;
}

absl::Status Tmpfs::Free(const std::string& name) {
  const std::string file = absl::StrCat(path_, "/", name);
  if (unlink(file.c_str()) != 0) {
    return absl::UnavailableError(absl::StrCat("unlink ", file, ": ", strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace falcon::tests::testing
