#include "cli/help/flags_help.h"

#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

ABSL_FLAG(int, help_test_count, 3, "how many");
ABSL_FLAG(std::string, help_test_name, "", "a name");

namespace falcon::cli::help {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

bool Wants(std::vector<std::string> args) {
  args.insert(args.begin(), "tool");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  return WantsHelp(static_cast<int>(argv.size()), argv.data());
}

TEST(FlagsHelpTest, WantsHelp) {
  EXPECT_TRUE(Wants({"--help"}));
  EXPECT_TRUE(Wants({"s2", "-help"}));
  EXPECT_TRUE(Wants({"-h"}));
  EXPECT_TRUE(Wants({"--helpfull"}));
  EXPECT_TRUE(Wants({"--help=falcon"}));
  EXPECT_FALSE(Wants({}));
  EXPECT_FALSE(Wants({"--json", "--helpless"}));
  EXPECT_FALSE(Wants({"--", "--help"}));
}

TEST(FlagsHelpTest, ListsTheFileFlagsWithDefaults) {
  const std::string text = FlagsHelp("tool: does things", "flags_help_test.cc", true);
  EXPECT_THAT(text, HasSubstr("tool: does things\n\nFlags:\n"));
  EXPECT_THAT(text, HasSubstr("  --help-test-count (how many) default: 3\n"));
  EXPECT_THAT(text, HasSubstr("  --help-test-name (a name) default: \"\"\n"));
  EXPECT_LT(text.find("--help-test-count"), text.find("--help-test-name"));
  EXPECT_THAT(text, Not(HasSubstr("--flagfile")));
  EXPECT_THAT(FlagsHelp("u", "flags_help_test.cc", false), HasSubstr("--help_test_count"));
}

TEST(NormalizeFlagNamesTest, DashesAndAliasesInNamesOnly) {
  std::vector<std::string> in = {"tool",           "--json-log=a-b",   "-micro-batches", "7",
                                 "--microbatches", "--nomicrobatches", "pos-arg",        "--",
                                 "--after-dash"};
  std::vector<char*> argv;
  for (std::string& a : in) argv.push_back(a.data());
  const std::vector<std::string> out = NormalizeFlagNames(
      static_cast<int>(argv.size()), argv.data(), {{"microbatches", "micro_batches"}});
  EXPECT_EQ(out, (std::vector<std::string>{"tool", "--json_log=a-b", "-micro_batches", "7",
                                           "--micro_batches", "--nomicro_batches", "pos-arg", "--",
                                           "--after-dash"}));
}

}  // namespace
}  // namespace falcon::cli::help
