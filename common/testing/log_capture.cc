#include "common/testing/log_capture.h"

namespace falcon::common::testing {

LogCapture::LogCapture() { google::AddLogSink(this); }

LogCapture::~LogCapture() { google::RemoveLogSink(this); }

void LogCapture::send(google::LogSeverity severity, const char* /*full_filename*/,
                      const char* /*base_filename*/, int /*line*/,
                      const google::LogMessageTime& /*time*/, const char* message,
                      size_t message_len) {
  absl::MutexLock lock(&mu_);
  lines_.emplace_back(message, message_len);
  if (severity >= google::GLOG_WARNING) warnings_.emplace_back(message, message_len);
}

std::vector<std::string> LogCapture::Lines() const {
  absl::MutexLock lock(&mu_);
  return lines_;
}

std::vector<std::string> LogCapture::Matching(absl::string_view needle) const {
  absl::MutexLock lock(&mu_);
  std::vector<std::string> out;
  for (const std::string& l : lines_) {
    if (absl::string_view(l).find(needle) != absl::string_view::npos) out.push_back(l);
  }
  return out;
}

std::vector<std::string> LogCapture::Warnings() const {
  absl::MutexLock lock(&mu_);
  return warnings_;
}

}  // namespace falcon::common::testing
