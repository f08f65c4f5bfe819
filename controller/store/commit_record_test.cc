#include "controller/store/commit_record.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "gtest/gtest.h"

namespace falcon::controller::store {
namespace {

std::string FreshDir(const std::string& name) {
  std::string dir = std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

CommitRecord Sample(uint64_t commit) {
  CommitRecord r;
  r.commit = commit;
  r.wal = "000012.log";
  r.wal_bytes = 56789;
  r.tables = {"events", "jobs"};
  r.figures = {{"jobs", 505}, {"batches", 12}};
  return r;
}

void Overwrite(const std::string& path, off_t offset, const std::string& bytes) {
  int fd = open(path.c_str(), O_WRONLY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(pwrite(fd, bytes.data(), bytes.size(), offset), static_cast<ssize_t>(bytes.size()));
  close(fd);
}

TEST(CommitRecordTest, EncodeDecodeRoundTrip) {
  CommitRecord r = Sample(1234);
  r.generation = 7;
  std::optional<CommitRecord> back = CommitRecord::Decode(r.Encode());
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->generation, 7u);
  EXPECT_EQ(back->commit, 1234u);
  EXPECT_EQ(back->wal, "000012.log");
  EXPECT_EQ(back->wal_bytes, 56789u);
  EXPECT_EQ(back->tables, (std::vector<std::string>{"events", "jobs"}));
  EXPECT_EQ(back->figures, (store::StoreFigures{{"jobs", 505}, {"batches", 12}}));
}

TEST(CommitRecordTest, AnyChangedByteOrCutIsRejected) {
  const std::string text = Sample(99).Encode();
  for (size_t i = 0; i < text.size(); ++i) {
    std::string bad = text;
    bad[i] = static_cast<char>(bad[i] ^ 0x04);
    EXPECT_FALSE(CommitRecord::Decode(bad).has_value()) << "byte " << i;
  }
  for (size_t cut = 0; cut < text.size(); ++cut) {
    EXPECT_FALSE(CommitRecord::Decode(text.substr(0, cut)).has_value()) << "cut at " << cut;
  }
}

TEST(CommitRecordFileTest, MissingFileIsNoRecord) {
  CommitRecordFile file(FreshDir("missing"));
  auto r = file.Read();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->has_value());
}

TEST(CommitRecordFileTest, NewestCopyWinsAndSurvivesReopen) {
  const std::string dir = FreshDir("newest");
  {
    CommitRecordFile file(dir);
    ASSERT_TRUE(file.Write(Sample(1), /*durable=*/true).ok());
    ASSERT_TRUE(file.Write(Sample(5), /*durable=*/false).ok());
    ASSERT_TRUE(file.Write(Sample(9), /*durable=*/false).ok());
  }
  EXPECT_EQ(std::filesystem::file_size(dir + "/FALCON_COMMIT"), 2 * CommitRecordFile::kCopyBytes);
  CommitRecordFile file(dir);
  auto r = file.Read();
  ASSERT_TRUE(r.ok() && r->has_value());
  EXPECT_EQ((*r)->commit, 9u);
  EXPECT_EQ((*r)->generation, 3u);
  // Writing after a read continues the generations.
  ASSERT_TRUE(file.Write(Sample(11), /*durable=*/false).ok());
  CommitRecordFile again(dir);
  EXPECT_EQ((*again.Read())->commit, 11u);
}

TEST(CommitRecordFileTest, TornNewerCopyFallsBackToTheOlder) {
  const std::string dir = FreshDir("torn");
  CommitRecordFile file(dir);
  ASSERT_TRUE(file.Write(Sample(1), true).ok());   // Generation 1: both copies (created whole).
  ASSERT_TRUE(file.Write(Sample(4), false).ok());  // Generation 2: copy 0.
  ASSERT_TRUE(file.Write(Sample(8), false).ok());  // Generation 3: copy 1.
  // A write of copy 1 cut short by a crash.
  Overwrite(file.path(), CommitRecordFile::kCopyBytes + 30, std::string(40, '\0'));
  CommitRecordFile reread(dir);
  auto r = reread.Read();
  ASSERT_TRUE(r.ok() && r->has_value()) << r.status();
  EXPECT_EQ((*r)->commit, 4u);  // Older, hence never more than was durable.
}

TEST(CommitRecordFileTest, BothCopiesDamagedIsDataLossNamingTheFile) {
  const std::string dir = FreshDir("damaged");
  CommitRecordFile file(dir);
  ASSERT_TRUE(file.Write(Sample(3), true).ok());
  Overwrite(file.path(), 10, "xx");
  Overwrite(file.path(), CommitRecordFile::kCopyBytes + 10, "xx");
  CommitRecordFile reread(dir);
  auto r = reread.Read();
  ASSERT_EQ(r.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(r.status().message().find(file.path()), std::string::npos) << r.status();
  // Writing again replaces the damaged file whole.
  ASSERT_TRUE(reread.Write(Sample(6), false).ok());
  CommitRecordFile fixed(dir);
  EXPECT_EQ((*fixed.Read())->commit, 6u);
}

TEST(CommitRecordFileTest, OversizedRecordIsRefused) {
  CommitRecordFile file(FreshDir("big"));
  CommitRecord r = Sample(1);
  r.tables.assign(1000, "a_table_name");
  EXPECT_EQ(file.Write(r, false).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace falcon::controller::store
