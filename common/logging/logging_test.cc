#include "common/logging/logging.h"

#include <glog/logging.h>

#include <string>

#include "absl/flags/reflection.h"
#include "gtest/gtest.h"

namespace falcon::common::logging {
namespace {

void SetVerbosity(const char* value) {
  absl::CommandLineFlag* flag = absl::FindCommandLineFlag("v");
  ASSERT_NE(flag, nullptr);
  std::string error;
  ASSERT_TRUE(flag->ParseFrom(value, &error)) << error;
}

TEST(InitLoggingTest, ForwardsVerbosityAndLogsToStderr) {
  SetVerbosity("2");
  InitLogging("logging_test");
  EXPECT_TRUE(google::IsGoogleLoggingInitialized());
  EXPECT_TRUE(FLAGS_logtostderr);
  EXPECT_EQ(FLAGS_v, 2);
  EXPECT_TRUE(VLOG_IS_ON(2));
  EXPECT_FALSE(VLOG_IS_ON(3));

  testing::internal::CaptureStderr();
  LOG(INFO) << "event opened job=j event=7 rank=1";
  VLOG(3) << "hidden detail";
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("event opened job=j event=7 rank=1"), std::string::npos) << err;
  EXPECT_EQ(err.find("hidden detail"), std::string::npos) << err;

  SetVerbosity("0");  // A second call updates the verbosity only.
  InitLogging("logging_test");
  EXPECT_FALSE(VLOG_IS_ON(1));
}

}  // namespace
}  // namespace falcon::common::logging
