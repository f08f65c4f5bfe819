#include "common/text_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace falcon::common {
namespace {

using ::testing::HasSubstr;

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

TEST(ReadTextFileTest, ReadsAWholeFile) {
  const std::string path = TempPath("whole.txt");
  std::ofstream(path) << "a,b\n1,2\n";
  absl::StatusOr<std::string> text = ReadTextFile(path);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text, "a,b\n1,2\n");
  // Exactly at the limit is fine.
  EXPECT_TRUE(ReadTextFile(path, 8).ok());
}

TEST(ReadTextFileTest, MissingFileIsNotFound) {
  absl::StatusOr<std::string> text = ReadTextFile("/nonexistent/file.csv");
  EXPECT_TRUE(absl::IsNotFound(text.status())) << text.status();
  EXPECT_THAT(text.status().message(), HasSubstr("/nonexistent/file.csv: cannot open file"));
}

TEST(ReadTextFileTest, DirectoryIsNamed) {
  const std::string dir = TempPath("a_directory");
  ::mkdir(dir.c_str(), 0755);
  absl::StatusOr<std::string> text = ReadTextFile(dir);
  EXPECT_TRUE(absl::IsInvalidArgument(text.status())) << text.status();
  EXPECT_EQ(text.status().message(), dir + ": is a directory, not a file");
}

TEST(ReadTextFileTest, RegularFileOverTheLimitIsRefusedNamingIt) {
  const std::string path = TempPath("big.txt");
  std::ofstream(path) << std::string(100, 'x');
  absl::StatusOr<std::string> text = ReadTextFile(path, 99, "--max_input_bytes");
  EXPECT_TRUE(absl::IsResourceExhausted(text.status())) << text.status();
  EXPECT_EQ(text.status().message(),
            path + ": larger than the limit of 99 bytes (--max_input_bytes)");
}

// A device that never ends stops at the limit (before: the whole of memory).
TEST(ReadTextFileTest, EndlessDeviceStopsAtTheLimit) {
  absl::StatusOr<std::string> text = ReadTextFile("/dev/zero", 1 << 20);
  EXPECT_TRUE(absl::IsResourceExhausted(text.status())) << text.status();
  EXPECT_EQ(text.status().message(), "/dev/zero: larger than the limit of 1048576 bytes");
}

TEST(ReadTextFileTest, EmptyDeviceIsEmpty) {
  absl::StatusOr<std::string> text = ReadTextFile("/dev/null");
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text, "");
}

}  // namespace
}  // namespace falcon::common

namespace falcon::common {
namespace {

TEST(WriteTextFileAtomicallyTest, WritesAndReplacesWholeFiles) {
  const std::string path = ::testing::TempDir() + "/atomic.txt";
  ASSERT_TRUE(WriteTextFileAtomically(path, "first version").ok());
  EXPECT_EQ(*ReadTextFile(path), "first version");
  ASSERT_TRUE(WriteTextFileAtomically(path, "2nd").ok());
  EXPECT_EQ(*ReadTextFile(path), "2nd");
}

TEST(WriteTextFileAtomicallyTest, NamesThePathWhenTheDirectoryIsMissing) {
  const std::string path = ::testing::TempDir() + "/no/such/dir/file.txt";
  const absl::Status s = WriteTextFileAtomically(path, "x");
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_NE(s.message().find(path), std::string::npos) << s;
}

}  // namespace
}  // namespace falcon::common
