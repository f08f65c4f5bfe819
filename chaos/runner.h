// Everything the fault driver does to the machine goes through a Runner: commands (tc), file
// operations (cgroup files, /proc), background processes (stress-ng) and waiting. The real one
// acts; the fake (fake_runner.h) records each operation as a line, so unit tests check the exact tc
// command lines and cgroup writes without root.
//
// Errors: Run returns OK with the exit code and output of a command that ran (a non-zero exit is
// not an error of Run; the caller decides), and an error only when the program could not be
// started. File operations return absl::ErrnoToStatus errors naming the path ("write
// /sys/fs/cgroup/cpu/x/cgroup.procs: No such process"): kNotFound for ENOENT, kPermissionDenied
// for EACCES, ...
#ifndef FALCON_CHAOS_RUNNER_H_
#define FALCON_CHAOS_RUNNER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace falcon::chaos {

struct CommandResult {
  int exit_code = 0;  // The shell's convention: 128 + signal when killed.
  std::string stdout_text;
  std::string stderr_text;
};

// A process started in the background (stress-ng).
class BackgroundProcess {
 public:
  virtual ~BackgroundProcess() = default;  // Kills the process (and its group) if still running.
  virtual int pid() const = 0;
  // SIGTERM to the process and its group, SIGKILL after a grace period, reaped. OK also when it
  // had already ended.
  virtual absl::Status Stop() = 0;
};

class Runner {
 public:
  virtual ~Runner() = default;

  // Runs argv (argv[0] looked up in PATH) to completion and captures its output.
  virtual absl::StatusOr<CommandResult> Run(const std::vector<std::string>& argv) = 0;

  virtual absl::StatusOr<std::string> ReadFile(const std::string& path) = 0;
  // Opens an existing file for writing (no create, no truncate semantics beyond the kernel's for
  // cgroup files) and writes `contents` in one write(2).
  virtual absl::Status WriteFile(const std::string& path, const std::string& contents) = 0;
  virtual bool Exists(const std::string& path) = 0;
  virtual absl::Status MakeDir(const std::string& path) = 0;
  virtual absl::Status RemoveDir(const std::string& path) = 0;
  // Names of the entries of a directory (no "." and ".."), sorted.
  virtual absl::StatusOr<std::vector<std::string>> ListDir(const std::string& path) = 0;

  // Starts argv (looked up in PATH) in a process group of its own, killed (SIGKILL) when the
  // calling thread's process ends (PR_SET_PDEATHSIG: start it from a thread that outlives it),
  // with stdout and stderr to /dev/null.
  virtual absl::StatusOr<std::unique_ptr<BackgroundProcess>> Spawn(
      const std::vector<std::string>& argv) = 0;

  // Waits `d` (while measuring a process's CPU use).
  virtual void Sleep(absl::Duration d) = 0;
};

// The machine itself.
std::unique_ptr<Runner> NewRealRunner();

}  // namespace falcon::chaos

#endif  // FALCON_CHAOS_RUNNER_H_
