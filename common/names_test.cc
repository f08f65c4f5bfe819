#include "common/names.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace falcon::common {
namespace {

TEST(JobNameTest, AcceptsTheAllowedCharactersUpTo128Bytes) {
  EXPECT_TRUE(IsValidJobName("a"));
  EXPECT_TRUE(IsValidJobName("Job-1.test_run"));
  EXPECT_TRUE(IsValidJobName(std::string(128, 'x')));
  EXPECT_TRUE(ValidateJobName("gpt.13b", "hello.job").ok());
}

TEST(JobNameTest, RejectsEmptyTooLongAndOtherCharacters) {
  EXPECT_FALSE(IsValidJobName(""));
  EXPECT_FALSE(IsValidJobName(std::string(129, 'x')));
  for (absl::string_view bad :
       std::vector<absl::string_view>{"a b", "a/b", "a:b", "ä", absl::string_view("a\0b", 3)}) {
    EXPECT_FALSE(IsValidJobName(bad)) << bad;
  }
}

TEST(JobNameTest, ErrorNamesTheFieldAndTheRule) {
  const absl::Status s = ValidateJobName("a b", "--job");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "--job: 'a b' is not 1 to 128 bytes of [A-Za-z0-9._-]");
  EXPECT_EQ(ValidateJobName("", "hello.job").message(),
            "hello.job: '' is not 1 to 128 bytes of [A-Za-z0-9._-]");
}

TEST(NodeNameTest, OneTo256Bytes) {
  EXPECT_TRUE(IsValidNodeName("node-1"));
  EXPECT_TRUE(IsValidNodeName(std::string(256, 'n')));
  EXPECT_FALSE(IsValidNodeName(""));
  EXPECT_FALSE(IsValidNodeName(std::string(257, 'n')));
  EXPECT_EQ(ValidateNodeName("", "hello.rank.node").message(),
            "hello.rank.node: must be 1 to 256 bytes of UTF-8");
}

TEST(AgentIdTest, OneTo256Bytes) {
  EXPECT_TRUE(IsValidAgentId("agent-1"));
  EXPECT_FALSE(IsValidAgentId(""));
  EXPECT_FALSE(IsValidAgentId(std::string(257, 'a')));
  EXPECT_EQ(ValidateAgentId("", "agent_id").message(), "agent_id: must be 1 to 256 bytes of UTF-8");
}

// Node names and agent ids travel in proto3 string fields: a peer refuses a message whose
// string is not UTF-8, so an agent started with --node=$'\xff' could never register.
TEST(NodeNameTest, MustBeUtf8) {
  EXPECT_TRUE(
      IsValidNodeName("n\xc3\xb6"
                      "de"));  // "node" with an o-umlaut.
  EXPECT_FALSE(IsValidNodeName("\xff"));
  EXPECT_FALSE(IsValidAgentId("a\xc3"));
  EXPECT_EQ(ValidateAgentId("\xff", "agent_id").message(),
            "agent_id: must be 1 to 256 bytes of UTF-8");
}

TEST(Utf8Test, WellFormedOnly) {
  EXPECT_TRUE(IsValidUtf8(""));
  EXPECT_TRUE(IsValidUtf8("ascii"));
  EXPECT_TRUE(IsValidUtf8("\xe2\x82\xac"));           // U+20AC
  EXPECT_TRUE(IsValidUtf8("\xf0\x9f\x98\x80"));       // U+1F600
  EXPECT_TRUE(IsValidUtf8("\xf4\x8f\xbf\xbf"));       // U+10FFFF
  EXPECT_FALSE(IsValidUtf8("\x80"));                  // Continuation byte first.
  EXPECT_FALSE(IsValidUtf8("\xc0\xaf"));              // Overlong '/'.
  EXPECT_FALSE(IsValidUtf8("\xe0\x80\xaf"));          // Overlong '/'.
  EXPECT_FALSE(IsValidUtf8("\xed\xa0\x80"));          // Surrogate U+D800.
  EXPECT_FALSE(IsValidUtf8("\xf4\x90\x80\x80"));      // Above U+10FFFF.
  EXPECT_FALSE(IsValidUtf8("\xe2\x82"));              // Truncated.
  EXPECT_FALSE(IsValidUtf8("\xf8\x88\x80\x80\x80"));  // 5-byte form.
  EXPECT_FALSE(IsValidUtf8(std::string("a\xe2", 2)));
}

}  // namespace
}  // namespace falcon::common
