#include "cluster/file_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

#include "absl/strings/str_cat.h"

namespace falcon::cluster {

absl::StatusOr<FileLock> FileLock::Lock(const std::string& path, bool wait) {
  // A holder may remove the file (RemoveAndRelease) between our open and our flock: then we hold
  // a lock on a file nobody else will open again. Retry until the locked file is the one at path.
  for (;;) {
    const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat("cannot open lock file ", path));
    int rc;
    do {
      rc = flock(fd, LOCK_EX | (wait ? 0 : LOCK_NB));
    } while (rc != 0 && errno == EINTR);
    if (rc != 0) {
      const int err = errno;
      close(fd);
      if (err == EWOULDBLOCK) {
        return absl::UnavailableError(absl::StrCat(path, " is locked by another process"));
      }
      return absl::ErrnoToStatus(err, absl::StrCat("cannot lock ", path));
    }
    struct stat held;
    struct stat named;
    if (fstat(fd, &held) == 0 && stat(path.c_str(), &named) == 0 && held.st_dev == named.st_dev &&
        held.st_ino == named.st_ino) {
      return FileLock(path, fd);
    }
    close(fd);
  }
}

absl::StatusOr<FileLock> FileLock::Acquire(const std::string& path) { return Lock(path, true); }
absl::StatusOr<FileLock> FileLock::TryAcquire(const std::string& path) { return Lock(path, false); }

FileLock::FileLock(FileLock&& other) noexcept
    : path_(std::move(other.path_)), fd_(std::exchange(other.fd_, -1)) {}

FileLock& FileLock::operator=(FileLock&& other) noexcept {
  if (this != &other) {
    Release();
    path_ = std::move(other.path_);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

FileLock::~FileLock() { Release(); }

void FileLock::Release() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

absl::Status FileLock::Write(absl::string_view contents) {
  if (fd_ < 0) return absl::FailedPreconditionError(absl::StrCat(path_, ": lock not held"));
  if (ftruncate(fd_, 0) != 0 ||
      pwrite(fd_, contents.data(), contents.size(), 0) != static_cast<ssize_t>(contents.size())) {
    return absl::ErrnoToStatus(errno, absl::StrCat("cannot write lock file ", path_));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> FileLock::Read() const {
  if (fd_ < 0) return absl::FailedPreconditionError(absl::StrCat(path_, ": lock not held"));
  char buf[4096];
  const ssize_t n = pread(fd_, buf, sizeof(buf), 0);
  if (n < 0) return absl::ErrnoToStatus(errno, absl::StrCat("cannot read lock file ", path_));
  return std::string(buf, static_cast<size_t>(n));
}

absl::Status FileLock::RemoveAndRelease() {
  absl::Status status;
  if (fd_ >= 0 && unlink(path_.c_str()) != 0 && errno != ENOENT) {
    status = absl::ErrnoToStatus(errno, absl::StrCat("cannot remove lock file ", path_));
  }
  Release();
  return status;
}

}  // namespace falcon::cluster
