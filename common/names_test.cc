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
            "hello.rank.node: must be 1 to 256 bytes");
}

TEST(AgentIdTest, OneTo256Bytes) {
  EXPECT_TRUE(IsValidAgentId("agent-1"));
  EXPECT_FALSE(IsValidAgentId(""));
  EXPECT_FALSE(IsValidAgentId(std::string(257, 'a')));
  EXPECT_EQ(ValidateAgentId("", "agent_id").message(), "agent_id: must be 1 to 256 bytes");
}

}  // namespace
}  // namespace falcon::common
