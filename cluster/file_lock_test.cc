#include "cluster/file_lock.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace falcon::cluster {
namespace {

std::string FreshPath() {
  const char* base = getenv("TEST_TMPDIR");
  std::string tmpl = absl::StrCat(base != nullptr ? base : "/tmp", "/file_lock.XXXXXX");
  if (mkdtemp(tmpl.data()) == nullptr) return "";
  return tmpl + "/x.lock";
}

TEST(FileLockTest, ExclusiveAcrossOpenFilesAndFreedOnRelease) {
  const std::string path = FreshPath();
  absl::StatusOr<FileLock> a = FileLock::TryAcquire(path);
  ASSERT_TRUE(a.ok()) << a.status();
  absl::StatusOr<FileLock> b = FileLock::TryAcquire(path);
  EXPECT_EQ(b.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(b.status().message(), path + " is locked by another process");
  ASSERT_TRUE(a->Write("pid=1\n").ok());
  EXPECT_EQ(*a->Read(), "pid=1\n");
  ASSERT_TRUE(a->Write("x").ok());
  EXPECT_EQ(*a->Read(), "x");
  a->Release();
  EXPECT_TRUE(FileLock::TryAcquire(path).ok());
}

TEST(FileLockTest, FreedWhenTheHolderDies) {
  const std::string path = FreshPath();
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    absl::StatusOr<FileLock> held = FileLock::Acquire(path);
    const char c = held.ok() ? 'y' : 'n';
    (void)!write(ready[1], &c, 1);
    pause();
    _exit(0);
  }
  char c = 0;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  ASSERT_EQ(c, 'y');
  EXPECT_EQ(FileLock::TryAcquire(path).status().code(), absl::StatusCode::kUnavailable);
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  EXPECT_TRUE(FileLock::TryAcquire(path).ok());
  close(ready[0]);
  close(ready[1]);
}

TEST(FileLockTest, RemoveAndReleaseRemovesTheFile) {
  const std::string path = FreshPath();
  absl::StatusOr<FileLock> a = FileLock::Acquire(path);
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(a->RemoveAndRelease().ok());
  struct stat st;
  EXPECT_NE(stat(path.c_str(), &st), 0);
  EXPECT_EQ(a->Read().status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(FileLockTest, MissingDirectoryIsNamed) {
  absl::StatusOr<FileLock> a = FileLock::TryAcquire("/nonexistent-falcon-dir/x.lock");
  EXPECT_EQ(a.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(a.status().message(), ::testing::HasSubstr("/nonexistent-falcon-dir/x.lock"));
}

}  // namespace
}  // namespace falcon::cluster
