#include "controller/util/page_token.h"

#include "gtest/gtest.h"

namespace falcon::controller::util {
namespace {

TEST(PageTokenTest, RoundTripsAndChecksTheRequest) {
  PageToken t{"events", "job-a|1|0", 1000, "4711"};
  const std::string encoded = EncodePageToken(t);
  absl::StatusOr<PageToken> back = DecodePageToken(encoded, "events", "job-a|1|0");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->served, 1000u);
  EXPECT_EQ(back->cursor, "4711");

  // Another filter (a request field changed between pages) or another list is refused.
  absl::StatusOr<PageToken> other = DecodePageToken(encoded, "events", "job-b|1|0");
  EXPECT_EQ(other.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(other.status().message().find("page_token"), std::string::npos);
  EXPECT_FALSE(DecodePageToken(encoded, "directives", "job-a|1|0").ok());
}

TEST(PageTokenTest, EmptyIsTheFirstPageAndGarbageIsRefused) {
  absl::StatusOr<PageToken> first = DecodePageToken("", "jobs", "");
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->served, 0u);
  EXPECT_TRUE(first->cursor.empty());
  for (const char* bad : {"!!!", "aGVsbG8", "am9icwoKeAp5"}) {  // Not base64; 1 part; bad count.
    absl::StatusOr<PageToken> t = DecodePageToken(bad, "jobs", "");
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

}  // namespace
}  // namespace falcon::controller::util
