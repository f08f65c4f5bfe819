#include "common/testing/run_binary.h"

#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace falcon::common::testing {
namespace {

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

absl::StatusOr<BinaryRun> RunBinary(const std::vector<std::string>& argv,
                                    const RunOptions& options) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  std::string base = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/run_binary.XXXXXX");
  const int fd = mkstemp(base.data());
  if (fd < 0) return absl::InternalError(absl::StrCat("mkstemp ", base, " failed"));
  close(fd);
  common::SpawnOptions spawn;
  spawn.argv = argv;
  spawn.env = options.env;
  spawn.cwd = options.cwd;
  spawn.stdin_stream =
      options.stdin_path.empty() ? common::Stdio::Null() : common::Stdio::File(options.stdin_path);
  spawn.stdout_stream = common::Stdio::File(base + ".out");
  spawn.stderr_stream = common::Stdio::File(base + ".err");
  absl::StatusOr<common::Subprocess> proc = common::Subprocess::Spawn(spawn);
  if (!proc.ok()) return proc.status();
  BinaryRun run;
  absl::StatusOr<std::optional<common::ExitStatus>> ended = proc->WaitFor(options.timeout);
  if (!ended.ok()) return ended.status();
  if (ended->has_value()) {
    run.status = **ended;
  } else {
    run.timed_out = true;
    absl::StatusOr<common::ExitStatus> killed = proc->Stop(SIGKILL, absl::ZeroDuration());
    if (!killed.ok()) return killed.status();
    run.status = *killed;
  }
  run.out = ReadAll(base + ".out");
  run.err = ReadAll(base + ".err");
  unlink(base.c_str());
  unlink((base + ".out").c_str());
  unlink((base + ".err").c_str());
  return run;
}

}  // namespace falcon::common::testing
