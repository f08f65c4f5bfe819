#include "common/testing/log_capture.h"

#include <glog/logging.h>

#include <thread>

#include "gtest/gtest.h"

namespace falcon::common::testing {
namespace {

TEST(LogCaptureTest, RecordsMessagesWhileAlive) {
  LOG(INFO) << "before capture";
  std::vector<std::string> lines;
  {
    LogCapture log;
    LOG(INFO) << "event opened job=j event=1";
    LOG(WARNING) << "mitigation not started job=j event=1";
    std::thread([] { LOG(INFO) << "from another thread"; }).join();
    EXPECT_EQ(log.Count("job=j"), 2);
    EXPECT_EQ(log.Count("before capture"), 0);
    EXPECT_EQ(log.Count("another thread"), 1);
    ASSERT_EQ(log.Warnings().size(), 1u);
    EXPECT_EQ(log.Warnings()[0], "mitigation not started job=j event=1");
    lines = log.Lines();
  }
  EXPECT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0], "event opened job=j event=1");
  LOG(INFO) << "after capture";  // No sink any more: nothing to crash into.
}

}  // namespace
}  // namespace falcon::common::testing
