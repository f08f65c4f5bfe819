// A Runner for unit tests: records every operation as one line in order, and answers from a
// small in-memory file system and scripted command results.
//
// Lines: "run tc -n ns qdisc add ...", "write PATH CONTENTS", "mkdir PATH", "rmdir PATH",
// "spawn stress-ng --cpu 1 ...", "stop PID", "sleep 1s". Reads, Exists and ListDir are not
// recorded.
//
// Files: SetFile(path, contents) creates a file (and its parent directories implicitly);
// WriteFile to a missing file is kNotFound, MakeDir creates a directory with the cgroup files
// named by `cgroup_files` (empty), RemoveDir of a directory holding a non-empty cgroup.procs is
// kFailedPrecondition ("Device or resource busy"). Writing a pid to a cgroup.procs moves it: the
// pid is appended there and leaves every other cgroup.procs; a pid without /proc/PID is ESRCH.
// Writing a TID to a `tasks` file (cgroup v1) moves the thread the same way among the `tasks`
// files (cgroup.procs files are left alone); a TID without a directory /proc/*/task/TID (e.g.
// made by SetFile of /proc/42/task/43/comm) is ESRCH. RemoveDir is also busy while `tasks` is
// not empty.
#ifndef FALCON_CHAOS_FAKE_RUNNER_H_
#define FALCON_CHAOS_FAKE_RUNNER_H_

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "chaos/runner.h"

namespace falcon::chaos {

class FakeRunner : public Runner {
 public:
  // The operations so far, one line each.
  const std::vector<std::string>& lines() const { return lines_; }
  // Lines starting with `prefix` ("run ", "write ", ...).
  std::vector<std::string> Lines(const std::string& prefix) const;
  void ClearLines() { lines_.clear(); }

  // A command whose joined argv starts with `prefix` gets `result` (the last matching rule
  // wins); others exit 0 with no output.
  void OnRun(const std::string& prefix, CommandResult result);
  // Writing exactly `contents` to `path` fails with errno `err` (recorded all the same).
  void FailWrite(const std::string& path, const std::string& contents, int err) {
    write_errors_[path + " " + contents] = err;
  }
  // A Spawn fails with `status` while set.
  void FailSpawn(absl::Status status) { spawn_error_ = std::move(status); }

  void SetFile(const std::string& path, const std::string& contents);
  void RemoveFile(const std::string& path);
  // Removes a directory and everything under it, unrecorded (a process or thread that ended).
  void RemoveTree(const std::string& path);
  void AddDir(const std::string& path) { dirs_.insert(path); }
  bool HasDir(const std::string& path) const { return dirs_.count(path) > 0; }
  std::string File(const std::string& path) const;  // "" when missing.

  // Called by Sleep (e.g. to advance a fake clock and the CPU time in /proc/PID/stat).
  std::function<void(absl::Duration)> on_sleep;

  // Files MakeDir creates inside a new directory (the cgroup interface files).
  std::vector<std::string> cgroup_files = {"cgroup.procs", "cpu.cfs_period_us", "cpu.cfs_quota_us",
                                           "cpu.max", "tasks"};
  // Background processes that are running (pid), started at 50000.
  const std::set<int>& running() const { return running_; }

  absl::StatusOr<CommandResult> Run(const std::vector<std::string>& argv) override;
  absl::StatusOr<std::string> ReadFile(const std::string& path) override;
  absl::Status WriteFile(const std::string& path, const std::string& contents) override;
  bool Exists(const std::string& path) override;
  absl::Status MakeDir(const std::string& path) override;
  absl::Status RemoveDir(const std::string& path) override;
  absl::StatusOr<std::vector<std::string>> ListDir(const std::string& path) override;
  absl::StatusOr<std::unique_ptr<BackgroundProcess>> Spawn(
      const std::vector<std::string>& argv) override;
  void Sleep(absl::Duration d) override;

 private:
  friend class FakeBackground;
  std::vector<std::string> lines_;
  std::vector<std::pair<std::string, CommandResult>> rules_;
  std::map<std::string, std::string> files_;
  std::map<std::string, int> write_errors_;
  std::set<std::string> dirs_;
  std::set<int> running_;
  int next_pid_ = 50000;
  absl::Status spawn_error_;
};

}  // namespace falcon::chaos

#endif  // FALCON_CHAOS_FAKE_RUNNER_H_
