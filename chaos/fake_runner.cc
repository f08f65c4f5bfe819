#include "chaos/fake_runner.h"

#include <errno.h>

#include <algorithm>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace falcon::chaos {
namespace {

std::string Parent(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos || slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace

class FakeBackground : public BackgroundProcess {
 public:
  FakeBackground(FakeRunner* runner, int pid) : runner_(runner), pid_(pid) {}
  ~FakeBackground() override { runner_->running_.erase(pid_); }
  int pid() const override { return pid_; }
  absl::Status Stop() override {
    runner_->lines_.push_back(absl::StrCat("stop ", pid_));
    runner_->running_.erase(pid_);
    return absl::OkStatus();
  }

 private:
  FakeRunner* runner_;
  int pid_;
};

std::vector<std::string> FakeRunner::Lines(const std::string& prefix) const {
  std::vector<std::string> out;
  for (const std::string& l : lines_) {
    if (absl::StartsWith(l, prefix)) out.push_back(l);
  }
  return out;
}

void FakeRunner::OnRun(const std::string& prefix, CommandResult result) {
  rules_.emplace_back(prefix, std::move(result));
}

void FakeRunner::SetFile(const std::string& path, const std::string& contents) {
  files_[path] = contents;
  for (std::string dir = Parent(path); dir != "/"; dir = Parent(dir)) dirs_.insert(dir);
}

void FakeRunner::RemoveFile(const std::string& path) { files_.erase(path); }

void FakeRunner::RemoveTree(const std::string& path) {
  const std::string prefix = path + "/";
  dirs_.erase(path);
  for (auto it = dirs_.begin(); it != dirs_.end();) {
    it = absl::StartsWith(*it, prefix) ? dirs_.erase(it) : std::next(it);
  }
  for (auto it = files_.begin(); it != files_.end();) {
    it = absl::StartsWith(it->first, prefix) ? files_.erase(it) : std::next(it);
  }
}

std::string FakeRunner::File(const std::string& path) const {
  auto it = files_.find(path);
  return it == files_.end() ? "" : it->second;
}

absl::StatusOr<CommandResult> FakeRunner::Run(const std::vector<std::string>& argv) {
  const std::string line = absl::StrJoin(argv, " ");
  lines_.push_back("run " + line);
  CommandResult result;
  for (const auto& [prefix, r] : rules_) {
    if (absl::StartsWith(line, prefix)) result = r;
  }
  return result;
}

absl::StatusOr<std::string> FakeRunner::ReadFile(const std::string& path) {
  auto it = files_.find(path);
  if (it == files_.end()) return absl::ErrnoToStatus(ENOENT, absl::StrCat("read ", path));
  return it->second;
}

absl::Status FakeRunner::WriteFile(const std::string& path, const std::string& contents) {
  lines_.push_back(absl::StrCat("write ", path, " ", contents));
  if (auto e = write_errors_.find(path + " " + contents); e != write_errors_.end()) {
    return absl::ErrnoToStatus(e->second, absl::StrCat("write ", path));
  }
  auto it = files_.find(path);
  if (it == files_.end()) return absl::ErrnoToStatus(ENOENT, absl::StrCat("write ", path));
  if (absl::EndsWith(path, "/cgroup.procs")) {
    const std::string pid(absl::StripAsciiWhitespace(contents));
    if (files_.count(absl::StrCat("/proc/", pid, "/status")) == 0) {
      return absl::ErrnoToStatus(ESRCH, absl::StrCat("write ", path));
    }
    for (auto& [p, text] : files_) {
      if (!absl::EndsWith(p, "/cgroup.procs")) continue;
      std::vector<std::string> pids = absl::StrSplit(text, '\n', absl::SkipEmpty());
      pids.erase(std::remove(pids.begin(), pids.end(), pid), pids.end());
      if (p == path) pids.push_back(pid);
      text = pids.empty() ? "" : absl::StrCat(absl::StrJoin(pids, "\n"), "\n");
    }
    return absl::OkStatus();
  }
  if (absl::EndsWith(path, "/tasks")) {
    const std::string tid(absl::StripAsciiWhitespace(contents));
    bool exists = false;
    for (const std::string& d : dirs_) exists = exists || absl::EndsWith(d, "/task/" + tid);
    if (!exists) return absl::ErrnoToStatus(ESRCH, absl::StrCat("write ", path));
    for (auto& [p, text] : files_) {
      if (!absl::EndsWith(p, "/tasks")) continue;
      std::vector<std::string> tids = absl::StrSplit(text, '\n', absl::SkipEmpty());
      tids.erase(std::remove(tids.begin(), tids.end(), tid), tids.end());
      if (p == path) tids.push_back(tid);
      text = tids.empty() ? "" : absl::StrCat(absl::StrJoin(tids, "\n"), "\n");
    }
    return absl::OkStatus();
  }
  it->second = contents;
  return absl::OkStatus();
}

bool FakeRunner::Exists(const std::string& path) {
  return files_.count(path) > 0 || dirs_.count(path) > 0;
}

absl::Status FakeRunner::MakeDir(const std::string& path) {
  lines_.push_back("mkdir " + path);
  if (Exists(path)) return absl::ErrnoToStatus(EEXIST, "mkdir " + path);
  if (dirs_.count(Parent(path)) == 0) return absl::ErrnoToStatus(ENOENT, "mkdir " + path);
  dirs_.insert(path);
  for (const std::string& f : cgroup_files) files_[path + "/" + f] = "";
  return absl::OkStatus();
}

absl::Status FakeRunner::RemoveDir(const std::string& path) {
  lines_.push_back("rmdir " + path);
  if (dirs_.count(path) == 0) return absl::ErrnoToStatus(ENOENT, "rmdir " + path);
  if (!File(path + "/cgroup.procs").empty() || !File(path + "/tasks").empty()) {
    return absl::ErrnoToStatus(EBUSY, "rmdir " + path);
  }
  dirs_.erase(path);
  for (auto it = files_.begin(); it != files_.end();) {
    it = absl::StartsWith(it->first, path + "/") ? files_.erase(it) : std::next(it);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> FakeRunner::ListDir(const std::string& path) {
  if (dirs_.count(path) == 0) return absl::ErrnoToStatus(ENOENT, "list " + path);
  std::set<std::string> names;
  const std::string prefix = path + "/";
  auto add = [&](const std::string& p) {
    if (!absl::StartsWith(p, prefix)) return;
    const std::string rest = p.substr(prefix.size());
    names.insert(rest.substr(0, rest.find('/')));
  };
  for (const auto& [p, text] : files_) add(p);
  for (const std::string& d : dirs_) add(d);
  return std::vector<std::string>(names.begin(), names.end());
}

absl::StatusOr<std::unique_ptr<BackgroundProcess>> FakeRunner::Spawn(
    const std::vector<std::string>& argv) {
  lines_.push_back("spawn " + absl::StrJoin(argv, " "));
  if (!spawn_error_.ok()) return spawn_error_;
  const int pid = next_pid_++;
  running_.insert(pid);
  return std::unique_ptr<BackgroundProcess>(new FakeBackground(this, pid));
}

void FakeRunner::Sleep(absl::Duration d) {
  lines_.push_back(absl::StrCat("sleep ", absl::FormatDuration(d)));
  if (on_sleep) on_sleep(d);
}

}  // namespace falcon::chaos
