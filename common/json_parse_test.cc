#include "common/json_parse.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace falcon::common {
namespace {

using ::testing::HasSubstr;

std::string Error(absl::string_view text, size_t max_depth = kDefaultMaxJsonDepth) {
  absl::StatusOr<nlohmann::json> doc = ParseJson(text, "f.json", max_depth);
  EXPECT_TRUE(absl::IsInvalidArgument(doc.status())) << text;
  return std::string(doc.status().message());
}

TEST(ParseJsonTest, BuildsTheSameDocumentAsNlohmann) {
  const std::string text =
      R"({"name": "x", "series": [{"label": "a", "raw": [1, -2, 3.5, 18446744073709551615]},)"
      R"( {"label": "b", "raw": [], "n": null, "t": true, "o": {}}], "dup": 1, "dup": 2})";
  absl::StatusOr<nlohmann::json> doc = ParseJson(text, "f.json");
  ASSERT_TRUE(doc.ok()) << doc.status();
  EXPECT_EQ(*doc, nlohmann::json::parse(text));
  EXPECT_EQ(*ParseJson("  7 ", "f"), nlohmann::json(7));
  EXPECT_EQ(*ParseJson("\"s\"", "f"), nlohmann::json("s"));
  EXPECT_EQ(*ParseJson("[[[]]]", "f"), nlohmann::json::parse("[[[]]]"));
}

// 1e400 used to escape as nlohmann's out_of_range exception and abort falcon_plan and
// falcon_detect.
TEST(ParseJsonTest, NumberOutOfRangeNamesTheField) {
  EXPECT_EQ(Error(R"({"series": [{"label": "a", "raw": [1, 2, 1e400]}]})"),
            "f.json: not valid JSON at line 1, column 46 (byte 46), at series[0].raw[2]: number "
            "overflow parsing '1e400'");
  EXPECT_EQ(Error("[{\"rank\": 0,\n \"dp\": -1e999}]"),
            "f.json: not valid JSON at line 2, column 13 (byte 26), at [0].dp: number overflow "
            "parsing '-1e999'");
  EXPECT_THAT(Error("1e400"), HasSubstr("number overflow parsing '1e400'"));
}

TEST(ParseJsonTest, SyntaxErrorsGiveLineColumnAndPath) {
  EXPECT_EQ(Error("{\"a\": [1,\n 2,,]}"),
            "f.json: not valid JSON at line 2, column 4 (byte 14), at a[2]: syntax error while "
            "parsing value - unexpected ','; expected '[', '{', or a literal");
  EXPECT_THAT(Error(""), HasSubstr("f.json: not valid JSON at line 1, column 1 (byte 1): "));
  EXPECT_THAT(Error("{} x"), HasSubstr("expected end of input"));
  EXPECT_THAT(Error(R"({"a": NaN})"), HasSubstr("at a: syntax error"));
  EXPECT_THAT(Error("{\"a\": \"\xff\"}"), HasSubstr("ill-formed UTF-8"));
}

TEST(ParseJsonTest, DepthIsBounded) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_THAT(Error(deep), HasSubstr("nested deeper than 100 levels"));
  EXPECT_THAT(Error(R"({"a": [[1]]})", 2), HasSubstr("at a[0]: nested deeper than 2 levels"));
  EXPECT_TRUE(ParseJson(R"({"a": [1]})", "f", 2).ok());
}

TEST(ParseJsonTest, OddKeysAreEscapedInThePath) {
  EXPECT_THAT(Error("{\"k\\n\": [1e400]}"), HasSubstr("at k\\n[0]: number overflow"));
}

}  // namespace
}  // namespace falcon::common
