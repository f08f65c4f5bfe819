#include "common/run_command.h"

#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace falcon::common {
namespace {

bool IsPlainWord(const std::string& word) {
  if (word.empty()) return false;
  for (char c : word) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) &&
        std::strchr("_./:=@%+,-", c) == nullptr) {
      return false;
    }
  }
  return true;
}

std::string Quote(const std::string& word) {
  if (IsPlainWord(word)) return word;
  std::string out = "'";
  for (char c : word) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

// Reads what is available on `fd` into `out` (up to `max` bytes kept). False at end of file.
absl::StatusOr<bool> ReadSome(int fd, std::string& out, size_t max, const std::string& what) {
  char buf[4096];
  const ssize_t n = read(fd, buf, sizeof(buf));
  if (n < 0) {
    if (errno == EINTR || errno == EAGAIN) return true;
    return absl::InternalError(absl::StrCat("reading ", what, ": ", std::strerror(errno)));
  }
  if (n == 0) return false;
  if (out.size() < max) out.append(buf, std::min(static_cast<size_t>(n), max - out.size()));
  return true;
}

}  // namespace

std::string CommandLine(const std::vector<std::string>& argv) {
  std::vector<std::string> words;
  words.reserve(argv.size());
  for (const std::string& a : argv) words.push_back(Quote(a));
  return absl::StrJoin(words, " ");
}

absl::StatusOr<CommandResult> RunCommand(const CommandOptions& options) {
  SpawnOptions spawn;
  spawn.argv = options.argv;
  spawn.search_path = true;
  spawn.parent_death_signal = SIGKILL;
  spawn.stdin_stream = Stdio::Null();
  spawn.stdout_stream = Stdio::Pipe();
  spawn.stderr_stream = Stdio::Pipe();
  absl::StatusOr<Subprocess> child = Subprocess::Spawn(spawn);
  if (!child.ok()) return child.status();
  const std::string line = CommandLine(options.argv);
  CommandResult result;
  const absl::Time deadline = absl::Now() + options.timeout;
  bool out_open = true;
  bool err_open = true;
  while (out_open || err_open) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      absl::StatusOr<ExitStatus> stopped = child->Stop(SIGKILL, absl::ZeroDuration());
      (void)stopped;  // The timeout is the error reported; the child is reaped either way.
      return absl::DeadlineExceededError(absl::StrCat("`", line, "` did not finish within ",
                                                      absl::FormatDuration(options.timeout),
                                                      " (killed)"));
    }
    pollfd fds[2];
    int n = 0;
    if (out_open) fds[n++] = {child->stdout_fd(), POLLIN, 0};
    if (err_open) fds[n++] = {child->stderr_fd(), POLLIN, 0};
    const int ms =
        static_cast<int>(std::min<int64_t>(absl::ToInt64Milliseconds(left) + 1, int64_t{1} << 30));
    const int ready = poll(fds, n, ms);
    if (ready < 0) {
      if (errno == EINTR) continue;
      return absl::InternalError(absl::StrCat("poll for `", line, "`: ", std::strerror(errno)));
    }
    for (int i = 0; i < n; ++i) {
      if (fds[i].revents == 0) continue;
      const bool is_out = fds[i].fd == child->stdout_fd();
      absl::StatusOr<bool> more = ReadSome(
          fds[i].fd, is_out ? result.stdout_text : result.stderr_text, options.max_output_bytes,
          absl::StrCat(is_out ? "stdout" : "stderr", " of `", line, "`"));
      if (!more.ok()) return more.status();
      if (!*more) (is_out ? out_open : err_open) = false;
    }
  }
  absl::StatusOr<ExitStatus> status = child->Wait();
  if (!status.ok()) return status.status();
  result.status = *status;
  return result;
}

absl::Status CommandFailure(const std::vector<std::string>& argv, const CommandResult& result) {
  std::string said(absl::StripAsciiWhitespace(result.stderr_text));
  if (said.empty()) said = std::string(absl::StripAsciiWhitespace(result.stdout_text));
  if (said.empty()) said = "(no output)";
  return absl::InternalError(
      absl::StrCat("`", CommandLine(argv), "` ", result.status.ToString(), ": ", said));
}

}  // namespace falcon::common
