// A small tmpfs mounted on a fresh directory, for tests that need a disk that fills up (a store's
// data directory that runs out of space). Mounting needs CAP_SYS_ADMIN (root, as here and in CI);
// where it is not permitted Mount fails and the test uses FALCON_SKIP_OR_FAIL (skip.h). The file
// system is unmounted and its directory removed on destruction. Not thread-safe.
#ifndef FALCON_TESTS_TESTING_TMPFS_H_
#define FALCON_TESTS_TESTING_TMPFS_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace falcon::tests::testing {

class Tmpfs {
 public:
  // Creates `dir` (must not exist) and mounts a tmpfs of `bytes` on it.
  // Errors: kFailedPrecondition naming mount(2)'s error (EPERM where it is not permitted).
  static absl::StatusOr<std::unique_ptr<Tmpfs>> Mount(const std::string& dir, uint64_t bytes);
  ~Tmpfs();
  Tmpfs(const Tmpfs&) = delete;
  Tmpfs& operator=(const Tmpfs&) = delete;

  const std::string& path() const { return path_; }
  // Free bytes now (statvfs).
  uint64_t free_bytes() const;
  // Writes the file `name` (in the tmpfs) until the file system is full. Returns its size.
  absl::StatusOr<uint64_t> Fill(const std::string& name);
  // Deletes the file `name`, freeing its space.
  absl::Status Free(const std::string& name);

 private:
  explicit Tmpfs(std::string path) : path_(std::move(path)) {}
  const std::string path_;
};

}  // namespace falcon::tests::testing

#endif  // FALCON_TESTS_TESTING_TMPFS_H_
