#include "common/flag_checks.h"

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace falcon::common {
namespace {

using ::testing::HasSubstr;

TEST(ParseDurationTest, AbseilDurationsAndPlainSeconds) {
  EXPECT_EQ(*ParseDuration("1.5s", "--x"), absl::Milliseconds(1500));
  EXPECT_EQ(*ParseDuration("500ms", "--x"), absl::Milliseconds(500));
  EXPECT_EQ(*ParseDuration("1h30m", "--x"), absl::Minutes(90));
  EXPECT_EQ(*ParseDuration(" 2.5 ", "--x"), absl::Milliseconds(2500));
  EXPECT_EQ(*ParseDuration("0", "--x"), absl::ZeroDuration());
  EXPECT_EQ(*ParseDuration("-1s", "--x"), absl::Seconds(-1));  // The range check refuses it.
}

TEST(ParseDurationTest, InfiniteAndMalformedAreRefusedNamingTheField) {
  for (const char* text : {"inf", "-inf", "nan", "1e400", "1e300", "99999999999999999h"}) {
    absl::StatusOr<absl::Duration> d = ParseDuration(text, "--tick");
    EXPECT_TRUE(absl::IsInvalidArgument(d.status())) << text << " -> " << d.status();
    EXPECT_EQ(d.status().message(), absl::StrCat("--tick: '", text, "' is not a finite duration"))
        << text;
  }
  EXPECT_EQ(ParseDuration("soon", "heartbeat_interval").status().message(),
            "heartbeat_interval: 'soon' is not a duration (e.g. 1.5s, 500ms, 10m or 2.5)");
  EXPECT_THAT(std::string(ParseDuration("", "--x").status().message()),
              HasSubstr("'' is not a duration"));
  EXPECT_THAT(std::string(ParseDuration("\xff", "--x").status().message()), HasSubstr("'\\xff'"));
}

// --tick 1ns used to spin the controller's housekeeping loop; inf stopped it.
TEST(CheckRangesTest, TheFirstFlagOutOfItsRangeIsNamed) {
  EXPECT_TRUE(CheckIntegersIn({{"--a", 1, 0, 2}, {"--b", 5, 5, 5}}).ok());
  EXPECT_EQ(CheckIntegersIn({{"--a", 1, 0, 2}, {"--b", 6, 0, 5}, {"--c", -1, 0, 5}}).message(),
            CheckIntegerIn(6, "--b", 0, 5).message());
  EXPECT_TRUE(
      CheckDurationsIn({{"--t", absl::Seconds(1), absl::ZeroDuration(), absl::Hours(1)}}).ok());
  EXPECT_EQ(CheckDurationsIn({{"--t", absl::Seconds(1), absl::ZeroDuration(), absl::Hours(1)},
                              {"--u", absl::Hours(2), absl::ZeroDuration(), absl::Hours(1)}})
                .message(),
            CheckDurationIn(absl::Hours(2), "--u", absl::ZeroDuration(), absl::Hours(1)).message());
}

TEST(CheckDurationInTest, NamesTheFieldTheValueAndTheRange) {
  EXPECT_TRUE(
      CheckDurationIn(absl::Seconds(1), "--tick", absl::Milliseconds(10), absl::Minutes(1)).ok());
  EXPECT_TRUE(
      CheckDurationIn(absl::Milliseconds(10), "--tick", absl::Milliseconds(10), absl::Minutes(1))
          .ok());
  EXPECT_EQ(
      CheckDurationIn(absl::Nanoseconds(1), "--tick", absl::Milliseconds(10), absl::Minutes(1))
          .message(),
      "--tick: 1ns is not in [10ms, 1m]");
  EXPECT_EQ(
      CheckDurationIn(absl::InfiniteDuration(), "--tick", absl::Milliseconds(10), absl::Minutes(1))
          .message(),
      "--tick: inf is not in [10ms, 1m]");
  EXPECT_FALSE(
      CheckDurationIn(absl::InfiniteDuration(), "x", absl::ZeroDuration(), absl::InfiniteDuration())
          .ok());
  EXPECT_FALSE(CheckDurationIn(absl::Seconds(-1), "x", absl::ZeroDuration(), absl::Hours(1)).ok());
}

TEST(CheckIntegerInTest, Range) {
  EXPECT_TRUE(CheckIntegerIn(1, "--n", 1, 10).ok());
  EXPECT_TRUE(CheckIntegerIn(10, "--n", 1, 10).ok());
  EXPECT_EQ(CheckIntegerIn(-1, "--n", 1, 10).message(), "--n: -1 is not in [1, 10]");
  EXPECT_EQ(CheckIntegerIn(11, "--n", 1, 10).message(), "--n: 11 is not in [1, 10]");
}

TEST(CheckNumberInTest, NanAndInfinityAreRefused) {
  EXPECT_TRUE(CheckNumberIn(0.5, "--lr", 0, 1).ok());
  EXPECT_EQ(CheckNumberIn(std::nan(""), "--lr", 0, 1).message(),
            "--lr: nan is not a number in [0, 1]");
  EXPECT_EQ(CheckNumberIn(HUGE_VAL, "--lr", 0, 1).message(), "--lr: inf is not a number in [0, 1]");
  EXPECT_FALSE(CheckNumberIn(-0.1, "--lr", 0, 1).ok());
}

// --limit 4294967297 used to become 1; CLI11 reads "010" as octal 8 and clamps overflow.
TEST(ParseCountTest, DecimalDigitsInRangeOnly) {
  EXPECT_EQ(*ParseCount("0", "--limit", 10), 0u);
  EXPECT_EQ(*ParseCount("010", "--limit", 10), 10u);
  EXPECT_EQ(*ParseCount("4294967295", "--limit", 4294967295u), 4294967295u);
  EXPECT_EQ(ParseCount("4294967297", "--limit", 4294967295u).status().message(),
            "--limit: '4294967297' is not an integer in [0, 4294967295]");
  EXPECT_EQ(ParseCount("-1", "", 10).status().message(), "'-1' is not an integer in [0, 10]");
  for (const char* text : {"", "-1", "+1", "0x10", "1e3", " 1", "99999999999999999999999"}) {
    EXPECT_FALSE(ParseCount(text, "--limit", UINT64_MAX).ok()) << text;
  }
}

TEST(CheckPathTest, EmptyAndOverlongPathsAreRefused) {
  EXPECT_TRUE(CheckPath("falcon-s4", "--s4_checkpoint_dir").ok());
  EXPECT_EQ(CheckPath("", "--s4_checkpoint_dir").message(),
            "--s4_checkpoint_dir: must not be empty");
  EXPECT_THAT(std::string(CheckPath(std::string(5000, 'a'), "--p").message()),
              HasSubstr("--p: path of 5000 bytes is longer than 4095"));
  EXPECT_THAT(std::string(CheckPath(std::string("a\0b", 3), "--p").message()), HasSubstr("NUL"));
}

TEST(CheckDirectoryPathTest, AnExistingFileIsNotADirectory) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = tmp != nullptr ? tmp : "/tmp";
  EXPECT_TRUE(CheckDirectoryPath(dir, "--data_dir").ok());
  EXPECT_TRUE(CheckDirectoryPath(dir + "/not-yet-there", "--data_dir").ok());
  const std::string file = dir + "/a-file";
  std::ofstream(file) << "x";
  EXPECT_EQ(CheckDirectoryPath(file, "--data_dir").message(),
            "--data_dir: '" + file + "' exists and is not a directory");
  EXPECT_FALSE(CheckDirectoryPath("", "--data_dir").ok());
}

TEST(CheckNoPositionalsTest, FirstStrayArgumentIsNamed) {
  char prog[] = "prog";
  char stray[] = "stray";
  EXPECT_TRUE(CheckNoPositionals({prog}).ok());
  EXPECT_TRUE(CheckNoPositionals({}).ok());
  EXPECT_EQ(CheckNoPositionals({prog, stray}).message(),
            "unexpected argument 'stray' (this program takes flags only; see --help)");
}

}  // namespace
}  // namespace falcon::common
