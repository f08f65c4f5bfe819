#include "tests/testing/skip.h"

#include <cstdlib>
#include <string>

#include "gtest/gtest-spi.h"
#include "gtest/gtest.h"

namespace falcon::tests::testing {
namespace {

// Runs FALCON_SKIP_OR_FAIL("the reason") in a function of its own (the macro returns from it).
void SkipOrFail() { FALCON_SKIP_OR_FAIL("the reason"); }
void RequireMissingTool() { FALCON_REQUIRE_EXECUTABLE("/nonexistent/tool", "apt install tool"); }
void RequirePresentTool() { FALCON_REQUIRE_EXECUTABLE("/bin/sh", "always there"); }

// The test part results `f` records, with its stdout.
struct Outcome {
  ::testing::TestPartResultArray results;
  std::string stdout_text;
};
template <typename F>
void Capture(F f, Outcome* out) {
  ::testing::ScopedFakeTestPartResultReporter reporter(
      ::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ONLY_CURRENT_THREAD, &out->results);
  ::testing::internal::CaptureStdout();
  f();
  out->stdout_text = ::testing::internal::GetCapturedStdout();
}

class SkipTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* ci = std::getenv("CI");
    if (ci != nullptr) saved_ = ci;
    had_ci_ = ci != nullptr;
  }
  void TearDown() override {
    if (had_ci_) {
      setenv("CI", saved_.c_str(), 1);
    } else {
      unsetenv("CI");
    }
  }
  std::string saved_;
  bool had_ci_ = false;
};

TEST_F(SkipTest, OutsideCiItSkipsWithTheMarkerLine) {
  unsetenv("CI");
  Outcome o;
  Capture(SkipOrFail, &o);
  ASSERT_EQ(o.results.size(), 1);
  EXPECT_TRUE(o.results.GetTestPartResult(0).skipped());
  EXPECT_NE(std::string(o.results.GetTestPartResult(0).message()).find("the reason"),
            std::string::npos);
  EXPECT_NE(o.stdout_text.find("\nFALCON-TEST-SKIPPED: the reason\n"), std::string::npos)
      << o.stdout_text;
}

TEST_F(SkipTest, UnderCiItFailsWithTheReasonAndNoMarker) {
  for (const char* value : {"true", "1"}) {
    setenv("CI", value, 1);
    Outcome o;
    Capture(SkipOrFail, &o);
    ASSERT_EQ(o.results.size(), 1) << value;
    EXPECT_TRUE(o.results.GetTestPartResult(0).fatally_failed()) << value;
    EXPECT_NE(std::string(o.results.GetTestPartResult(0).message()).find("the reason"),
              std::string::npos);
    EXPECT_EQ(o.stdout_text.find("FALCON-TEST-SKIPPED"), std::string::npos) << o.stdout_text;
  }
}

TEST_F(SkipTest, CiFalseStillSkips) {
  setenv("CI", "false", 1);
  Outcome o;
  Capture(SkipOrFail, &o);
  ASSERT_EQ(o.results.size(), 1);
  EXPECT_TRUE(o.results.GetTestPartResult(0).skipped());
}

TEST_F(SkipTest, RequireExecutableNamesTheToolAndTheHint) {
  unsetenv("CI");
  Outcome missing;
  Capture(RequireMissingTool, &missing);
  ASSERT_EQ(missing.results.size(), 1);
  EXPECT_TRUE(missing.results.GetTestPartResult(0).skipped());
  EXPECT_NE(missing.stdout_text.find(
                "FALCON-TEST-SKIPPED: /nonexistent/tool is not installed (apt install tool)"),
            std::string::npos)
      << missing.stdout_text;
  Outcome present;
  Capture(RequirePresentTool, &present);
  EXPECT_EQ(present.results.size(), 0);
  EXPECT_EQ(present.stdout_text, "");
}

}  // namespace
}  // namespace falcon::tests::testing

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
