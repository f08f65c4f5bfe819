// Captures the glog lines a test's code logs, to check what an operator would read: while a
// LogCapture lives, every LOG/VLOG message of this process (any thread, at or above the
// verbosity in force) is also recorded, without its prefix. Thread-safe.
//
//   common::testing::LogCapture log;
//   DoSomething();
//   EXPECT_EQ(log.Count("mitigation not started"), 1);
#ifndef FALCON_COMMON_TESTING_LOG_CAPTURE_H_
#define FALCON_COMMON_TESTING_LOG_CAPTURE_H_

#include <glog/logging.h>

#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace falcon::common::testing {

class LogCapture final : public google::LogSink {
 public:
  LogCapture();
  ~LogCapture() override;
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;

  // The messages so far (no severity/time/file prefix), in order.
  std::vector<std::string> Lines() const;
  // Messages that contain `needle`.
  std::vector<std::string> Matching(absl::string_view needle) const;
  int Count(absl::string_view needle) const { return static_cast<int>(Matching(needle).size()); }
  // Messages logged at WARNING or above.
  std::vector<std::string> Warnings() const;

  void send(google::LogSeverity severity, const char* full_filename, const char* base_filename,
            int line, const google::LogMessageTime& time, const char* message,
            size_t message_len) override;

 private:
  mutable absl::Mutex mu_;
  std::vector<std::string> lines_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> warnings_ ABSL_GUARDED_BY(mu_);
};

}  // namespace falcon::common::testing

#endif  // FALCON_COMMON_TESTING_LOG_CAPTURE_H_
