#include "cli/plan/layout_io.h"

#include "common/text_file.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace falcon::cli::plan {
namespace {

using ::testing::HasSubstr;

TEST(LayoutIoTest, ReadsCsvAndJsonFiles) {
  absl::StatusOr<std::string> csv = common::ReadTextFile("cli/plan/testdata/four_nodes.csv");
  ASSERT_TRUE(csv.ok()) << csv.status();
  absl::StatusOr<analysis::plan::Layout> a = ParseLayout(*csv, "four_nodes.csv");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->world_size(), 8);
  EXPECT_EQ(a->NodeAt(1, 0), "node2");
  absl::StatusOr<std::string> json = common::ReadTextFile("cli/plan/testdata/two_nodes.json");
  ASSERT_TRUE(json.ok()) << json.status();
  absl::StatusOr<analysis::plan::Layout> b = ParseLayout(*json, "two_nodes.json");
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->dp_size(), 2);
  EXPECT_EQ(b->pp_size(), 2);
  EXPECT_EQ(b->NodeAt(0, 1), "A");
}

TEST(LayoutIoTest, SkipsAUtf8ByteOrderMark) {
  const std::string bom = "\xEF\xBB\xBF";
  absl::StatusOr<analysis::plan::Layout> csv =
      ParseLayout(bom + "rank,node,dp,pp,tp\n0,n,0,0,0\n1,m,1,0,0\n", "bom.csv");
  ASSERT_TRUE(csv.ok()) << csv.status();
  EXPECT_EQ(csv->dp_size(), 2);
  absl::StatusOr<analysis::plan::Layout> json =
      ParseLayout(bom + R"([{"rank":0,"node":"n","dp":0,"pp":0,"tp":0}])", "bom.json");
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_EQ(json->world_size(), 1);
}

TEST(LayoutIoTest, RoundTrips) {
  absl::StatusOr<analysis::plan::Layout> a =
      ParseLayout(*common::ReadTextFile("cli/plan/testdata/four_nodes.csv"), "x");
  ASSERT_TRUE(a.ok());
  absl::StatusOr<analysis::plan::Layout> from_csv = ParseLayout(LayoutToCsv(*a), "csv");
  ASSERT_TRUE(from_csv.ok()) << from_csv.status();
  EXPECT_EQ(*from_csv, *a);
  absl::StatusOr<analysis::plan::Layout> from_json = ParseLayout(LayoutToJson(*a).dump(), "json");
  ASSERT_TRUE(from_json.ok()) << from_json.status();
  EXPECT_EQ(*from_json, *a);
  // Column order does not matter and extra columns are ignored.
  absl::StatusOr<analysis::plan::Layout> shuffled =
      ParseLayout("tp,pp,dp,gpu,node,rank\n0,0,0,7,n,0\n0,0,1,3,m,1\n", "s");
  ASSERT_TRUE(shuffled.ok()) << shuffled.status();
  EXPECT_EQ(shuffled->at(1).node, "m");
}

TEST(LayoutIoTest, ErrorsNameTheField) {
  auto error = [](absl::string_view text) {
    absl::StatusOr<analysis::plan::Layout> l = ParseLayout(text, "f");
    EXPECT_EQ(l.status().code(), absl::StatusCode::kInvalidArgument);
    return std::string(l.status().message());
  };
  EXPECT_THAT(error("rank,node,dp,pp\n0,a,0,0\n"), HasSubstr("f:1: header has no column 'tp'"));
  EXPECT_THAT(error("rank,node,dp,pp,tp\n0,a,x,0,0\n"), HasSubstr("f:2: column dp: 'x'"));
  EXPECT_THAT(error("rank,node,dp,pp,tp\n0,a,0\n"), HasSubstr("f:2: column pp: missing"));
  EXPECT_THAT(error("# nothing\n"), HasSubstr("f: no header"));
  EXPECT_THAT(error("rank,node,dp,pp,tp\n0,a,0,0,0\n0,b,1,0,0\n"),
              HasSubstr("f: ranks[1] (rank 0).rank: repeats ranks[0]"));
  EXPECT_THAT(error("{\"layout\": [{\"rank\": 0, \"node\": \"a\", \"dp\": 0, \"pp\": 0}]}"),
              HasSubstr("f: layout[0].tp: missing"));
  EXPECT_THAT(error("[{\"rank\": 0, \"node\": 5, \"dp\": 0, \"pp\": 0, \"tp\": 0}]"),
              HasSubstr("f: [0].node: not a string"));
  EXPECT_THAT(error("{\"layout\": [1,]"),
              HasSubstr("f: not valid JSON at line 1, column 15 (byte 15), at layout[1]: syntax "
                        "error"));
  EXPECT_THAT(error("{\"ranks\": []}"), HasSubstr("no \"layout\" array"));
  EXPECT_EQ(common::ReadTextFile("/nonexistent/x.csv").status().code(),
            absl::StatusCode::kNotFound);
}

// 1e400 aborted falcon_plan s3 (nlohmann's out_of_range escaped); 2^64 - 1 wrapped to rank -1.
TEST(LayoutIoTest, NumbersOutOfRangeAreErrorsNamingTheField) {
  auto error = [](absl::string_view text) {
    absl::StatusOr<analysis::plan::Layout> l = ParseLayout(text, "f");
    EXPECT_EQ(l.status().code(), absl::StatusCode::kInvalidArgument);
    return std::string(l.status().message());
  };
  EXPECT_EQ(error(R"({"layout": [{"rank": 0, "node": "a", "dp": 1e400, "pp": 0, "tp": 0}]})"),
            "f: not valid JSON at line 1, column 48 (byte 48), at layout[0].dp: number overflow "
            "parsing '1e400'");
  EXPECT_EQ(error(R"([{"rank": 18446744073709551615, "node": "a", "dp": 0, "pp": 0, "tp": 0}])"),
            "f: [0].rank: 18446744073709551615 is out of range");
  EXPECT_EQ(error(R"([{"rank": 0, "node": "a", "dp": -2147483649, "pp": 0, "tp": 0}])"),
            "f: [0].dp: -2147483649 is out of range");
  EXPECT_THAT(error(R"([{"rank": 0, "node": "a", "dp": 0, "pp": 1.5, "tp": 0}])"),
              HasSubstr("f: [0].pp: not an integer"));
}

}  // namespace
}  // namespace falcon::cli::plan
