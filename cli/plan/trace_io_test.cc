#include "cli/plan/trace_io.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace falcon::cli::plan {
namespace {

using ::testing::HasSubstr;

TEST(TraceIoTest, ParsesRowsAndCauses) {
  absl::StatusOr<std::vector<TraceRow>> rows = ParseTrace(
      "# comment\ncause,iteration,iteration_time_s\nnone,0,1.0\ncompute,1,1.5\n\ncomm,2,2\n"
      "Unknown,3,2\nhealthy,4,1\n,5,1\n",
      "t");
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 6u);
  EXPECT_FALSE((*rows)[0].cause.has_value());
  EXPECT_EQ((*rows)[1].cause, analysis::plan::Cause::kCompute);
  EXPECT_EQ((*rows)[1].iteration_time, absl::Milliseconds(1500));
  EXPECT_EQ((*rows)[1].line, 4);
  EXPECT_EQ((*rows)[2].cause, analysis::plan::Cause::kCommunication);
  EXPECT_EQ((*rows)[3].cause, analysis::plan::Cause::kUnknown);
  EXPECT_FALSE((*rows)[4].cause.has_value());
  EXPECT_FALSE((*rows)[5].cause.has_value());
}

TEST(TraceIoTest, SkipsAUtf8ByteOrderMark) {
  absl::StatusOr<std::vector<TraceRow>> rows =
      ParseTrace("\xEF\xBB\xBFiteration,iteration_time_s,cause\n0,1,none\n", "bom.csv");
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_EQ(rows->size(), 1u);
}

TEST(TraceIoTest, ErrorsNameTheLineAndColumn) {
  auto error = [](absl::string_view text) {
    absl::StatusOr<std::vector<TraceRow>> r = ParseTrace(text, "t.csv");
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    return std::string(r.status().message());
  };
  const std::string header = "iteration,iteration_time_s,cause\n";
  EXPECT_THAT(error("iteration,cause\n"), HasSubstr("t.csv:1: header has no column "
                                                    "'iteration_time_s'"));
  EXPECT_THAT(error(header + "0,nan,none\n"), HasSubstr("t.csv:2: column iteration_time_s"));
  EXPECT_THAT(error(header + "0,-1,none\n"), HasSubstr("t.csv:2: column iteration_time_s"));
  EXPECT_THAT(error(header + "x,1,none\n"), HasSubstr("t.csv:2: column iteration: 'x'"));
  EXPECT_THAT(error(header + "1,1,none\n1,1,none\n"), HasSubstr("t.csv:3: column iteration: 1 "
                                                                "does not increase"));
  // A short row is not a healthy row with an empty cause: it names the missing column.
  EXPECT_THAT(error(header + "0,1,none\n1,1\n"),
              HasSubstr("t.csv:3: column cause: missing (the row has 2 columns, the header 3)"));
  EXPECT_THAT(error("cause,iteration,iteration_time_s\ncompute,0\n"),
              HasSubstr("t.csv:2: column iteration_time_s: missing (the row has 2 columns, the "
                        "header 3)"));
  EXPECT_THAT(error(header + "0,1,none,extra\n"),
              HasSubstr("t.csv:2: the row has 4 columns, the header 3"));
  EXPECT_THAT(error(header + "0,1,gpu\n"), HasSubstr("t.csv:2: column cause: 'gpu'"));
  EXPECT_THAT(error(header), HasSubstr("t.csv: no rows"));
  EXPECT_THAT(error(""), HasSubstr("t.csv: no header"));
}

}  // namespace
}  // namespace falcon::cli::plan
