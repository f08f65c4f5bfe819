// An exclusive flock(2) on a file, held while the FileLock lives. The kernel releases it when the
// holder closes the file or dies, however it dies, which is what makes a lock file a liveness
// signal that works across PID namespaces (a pid does not: the creator of a netns cluster and a
// later `falcon_netns cleanup` may see different pids for the same process).
//
// The file is opened O_CLOEXEC: children that exec do not hold the lock; a child forked without
// exec shares it until it exits.
//
// Errors: kUnavailable "PATH is locked by another process" (TryAcquire only); from errno naming the
// path when the file cannot be opened or created (0644) or flock fails.
#ifndef FALCON_CLUSTER_FILE_LOCK_H_
#define FALCON_CLUSTER_FILE_LOCK_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace falcon::cluster {

class FileLock {
 public:
  // Blocks until the lock is free. Creates the file when missing.
  static absl::StatusOr<FileLock> Acquire(const std::string& path);
  // Does not block: kUnavailable when another open file holds the lock.
  static absl::StatusOr<FileLock> TryAcquire(const std::string& path);

  FileLock(FileLock&& other) noexcept;
  FileLock& operator=(FileLock&& other) noexcept;
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  ~FileLock();  // Releases (closes).

  const std::string& path() const { return path_; }
  // Replaces the file's contents (a note for whoever looks: "pid=42", "detached").
  absl::Status Write(absl::string_view contents);
  // The file's contents (at most 4 KiB).
  absl::StatusOr<std::string> Read() const;
  // Removes the file while still holding the lock, then releases it. Errors naming the path.
  absl::Status RemoveAndRelease();
  void Release();

 private:
  FileLock(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  static absl::StatusOr<FileLock> Lock(const std::string& path, bool wait);

  std::string path_;
  int fd_ = -1;
};

}  // namespace falcon::cluster

#endif  // FALCON_CLUSTER_FILE_LOCK_H_
