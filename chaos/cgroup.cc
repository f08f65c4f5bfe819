#include "chaos/cgroup.h"

#include <errno.h>

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/algorithm/container.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"

namespace falcon::chaos {
namespace {

absl::Status Annotate(const absl::Status& s, absl::string_view what) {
  return absl::Status(s.code(), absl::StrCat(what, ": ", s.message()));
}

std::string ProcPath(int pid, absl::string_view file) {
  return absl::StrCat("/proc/", pid, "/", file);
}

}  // namespace

absl::StatusOr<CgroupHierarchy> DetectCgroupHierarchy(Runner* runner,
                                                      const std::string& sys_fs_cgroup) {
  const std::string v2 = sys_fs_cgroup + "/cgroup.controllers";
  if (runner->Exists(v2)) {
    absl::StatusOr<std::string> controllers = runner->ReadFile(v2);
    if (!controllers.ok()) return controllers.status();
    std::vector<absl::string_view> names =
        absl::StrSplit(*controllers, absl::ByAnyChar(" \n"), absl::SkipEmpty());
    if (std::find(names.begin(), names.end(), "cpu") == names.end()) {
      return absl::FailedPreconditionError(
          absl::StrCat("cgroup v2 at ", sys_fs_cgroup, " has no cpu controller (", v2, ": '",
                       absl::StripAsciiWhitespace(*controllers), "')"));
    }
    return CgroupHierarchy{CgroupVersion::kV2, sys_fs_cgroup};
  }
  const std::string v1 = sys_fs_cgroup + "/cpu";
  if (runner->Exists(v1 + "/cpu.cfs_quota_us")) return CgroupHierarchy{CgroupVersion::kV1, v1};
  return absl::FailedPreconditionError(absl::StrCat(
      "no cgroup cpu controller: neither ", v2, " (v2) nor ", v1, "/cpu.cfs_quota_us (v1) exists"));
}

std::string ChaosCgroupTag(absl::string_view cluster_prefix) {
  if (cluster_prefix.empty()) return "loopback";
  std::string tag(cluster_prefix);
  for (char& c : tag) {
    if (!absl::ascii_isalnum(c) && c != '_' && c != '-') c = '_';
  }
  return tag;
}

std::string FormatChaosCgroupName(const ChaosCgroupName& name) {
  return absl::StrCat(kChaosCgroupPrefix, name.tag, ".", name.driver_pid, ".", name.fault_id);
}

std::optional<ChaosCgroupName> ParseChaosCgroupName(absl::string_view name) {
  if (!absl::ConsumePrefix(&name, kChaosCgroupPrefix)) return std::nullopt;
  std::vector<absl::string_view> parts = absl::StrSplit(name, '.');
  ChaosCgroupName out;
  if (parts.size() != 3 || parts[0].empty() || !absl::SimpleAtoi(parts[1], &out.driver_pid) ||
      !absl::SimpleAtoi(parts[2], &out.fault_id) || out.driver_pid <= 0 || out.fault_id <= 0) {
    return std::nullopt;
  }
  out.tag = std::string(parts[0]);
  return out;
}

std::string Cgroups::Dir(const std::string& relative) const {
  return relative == "/" ? hierarchy_.root : hierarchy_.root + relative;
}

absl::StatusOr<std::string> Cgroups::CgroupOf(int pid) {
  return CgroupIn(ProcPath(pid, "cgroup"), absl::StrCat("cgroup of pid ", pid));
}

absl::StatusOr<std::string> Cgroups::CgroupOfThread(int pid, int tid) {
  return CgroupIn(ProcPath(pid, absl::StrCat("task/", tid, "/cgroup")),
                  absl::StrCat("cgroup of thread ", tid, " of pid ", pid));
}

absl::StatusOr<std::string> Cgroups::CgroupIn(const std::string& proc_cgroup,
                                              const std::string& what) {
  absl::StatusOr<std::string> text = runner_->ReadFile(proc_cgroup);
  if (!text.ok()) return Annotate(text.status(), what);
  for (absl::string_view line : absl::StrSplit(*text, '\n', absl::SkipEmpty())) {
    // "ID:CONTROLLERS:PATH"; PATH may itself hold ':'.
    std::vector<absl::string_view> f = absl::StrSplit(line, absl::MaxSplits(':', 2));
    if (f.size() != 3) continue;
    const bool match = hierarchy_.version == CgroupVersion::kV2
                           ? f[0] == "0" && f[1].empty()
                           : absl::c_linear_search(
                                 std::vector<absl::string_view>(absl::StrSplit(f[1], ',')), "cpu");
    if (match) return std::string(f[2]);
  }
  return absl::FailedPreconditionError(
      absl::StrCat(what, ": ", proc_cgroup, " has no ",
                   hierarchy_.version == CgroupVersion::kV2 ? "v2 (0::)" : "cpu", " line"));
}

absl::Status Cgroups::CheckThreadsSupported(int pid) const {
  if (hierarchy_.version == CgroupVersion::kV1) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "cgroup for pid ", pid,
      ": throttling single threads (thread=) needs cgroup v1; on cgroup v2 a thread can only be "
      "capped inside a threaded subtree (cgroup.type \"threaded\") under the process's own "
      "cgroup, which the driver does not convert: throttle the whole process (no thread=) "
      "instead"));
}

absl::StatusOr<Throttle> Cgroups::Apply(int pid, const std::string& name, double cores,
                                        absl::Duration period, const std::vector<int>& tids) {
  const std::string what = absl::StrCat("cgroup for pid ", pid);
  if (!tids.empty()) {
    if (absl::Status s = CheckThreadsSupported(pid); !s.ok()) return s;
  }
  Throttle t;
  absl::StatusOr<std::string> origin = CgroupOf(pid);
  if (!origin.ok()) return origin.status();
  t.origin = *origin;
  for (int tid : tids) {
    absl::StatusOr<std::string> o = CgroupOfThread(pid, tid);
    if (!o.ok()) return o.status();
    if (t.threads.empty()) t.origin = *o;
    t.threads.push_back({tid, *o});
  }
  std::vector<std::string> origins = {t.origin};
  for (const ThreadOrigin& th : t.threads) origins.push_back(th.origin);
  for (const std::string& o : origins) {
    if (!runner_->Exists(Dir(o))) {
      return absl::FailedPreconditionError(absl::StrCat(what, ": its cgroup ", o, " is not under ",
                                                        hierarchy_.root,
                                                        " (another cgroup namespace?)"));
    }
  }
  if (hierarchy_.version == CgroupVersion::kV2) {
    const std::string control = hierarchy_.root + "/cgroup.subtree_control";
    absl::StatusOr<std::string> enabled = runner_->ReadFile(control);
    if (!enabled.ok()) return Annotate(enabled.status(), what);
    std::vector<absl::string_view> names =
        absl::StrSplit(*enabled, absl::ByAnyChar(" \n"), absl::SkipEmpty());
    if (!absl::c_linear_search(names, "cpu")) {
      return absl::FailedPreconditionError(absl::StrCat(what,
                                                        ": the cpu controller is not enabled in ",
                                                        control, " (echo +cpu > ", control, ")"));
    }
  }
  t.period_us = absl::ToInt64Microseconds(period);
  t.quota_us = std::max<int64_t>(1000, std::llround(cores * static_cast<double>(t.period_us)));
  t.cgroup = hierarchy_.root + "/" + name;
  if (absl::Status s = runner_->MakeDir(t.cgroup); !s.ok()) return Annotate(s, what);
  std::vector<std::pair<std::string, std::string>> writes;
  if (hierarchy_.version == CgroupVersion::kV2) {
    writes = {{"cpu.max", absl::StrCat(t.quota_us, " ", t.period_us)}};
  } else {
    writes = {{"cpu.cfs_period_us", absl::StrCat(t.period_us)},
              {"cpu.cfs_quota_us", absl::StrCat(t.quota_us)}};
  }
  if (tids.empty()) writes.emplace_back("cgroup.procs", absl::StrCat(pid));
  for (const auto& [file, value] : writes) {
    if (absl::Status s = runner_->WriteFile(t.cgroup + "/" + file, value); !s.ok()) {
      if (absl::Status r = runner_->RemoveDir(t.cgroup); !r.ok()) {
        return Annotate(s,
                        absl::StrCat(what, " (and removing it again failed: ", r.message(), ")"));
      }
      if (file == "cgroup.procs" && !runner_->Exists(ProcPath(pid, "status"))) {
        return absl::NotFoundError(absl::StrCat(what, ": process ", pid, " has exited"));
      }
      return Annotate(s, what);
    }
  }
  if (!t.threads.empty()) {
    std::vector<ThreadOrigin> joined;
    for (const ThreadOrigin& th : t.threads) {
      absl::Status s = runner_->WriteFile(t.cgroup + "/tasks", absl::StrCat(th.tid));
      if (s.ok()) {
        joined.push_back(th);
        continue;
      }
      if (!runner_->Exists(ProcPath(pid, absl::StrCat("task/", th.tid)))) continue;  // Ended.
      // Undo: the threads that joined go back, the cgroup goes.
      absl::Status undone;
      for (const ThreadOrigin& j : joined) {
        absl::Status b = runner_->WriteFile(Dir(j.origin) + "/tasks", absl::StrCat(j.tid));
        if (!b.ok() && runner_->Exists(ProcPath(pid, absl::StrCat("task/", j.tid)))) undone = b;
      }
      if (undone.ok()) undone = runner_->RemoveDir(t.cgroup);
      if (!undone.ok()) {
        return Annotate(s, absl::StrCat(what, ": thread ", th.tid,
                                        " (and undoing it failed: ", undone.message(), ")"));
      }
      return Annotate(s, absl::StrCat(what, ": thread ", th.tid));
    }
    if (joined.empty()) {
      absl::Status removed = runner_->RemoveDir(t.cgroup);
      return absl::NotFoundError(absl::StrCat(
          what, ": its threads ",
          absl::StrJoin(
              t.threads, ", ",
              [](std::string* out, const ThreadOrigin& th) { absl::StrAppend(out, th.tid); }),
          " ended before they could be moved",
          removed.ok()
              ? ""
              : absl::StrCat(" (and removing the cgroup failed: ", removed.message(), ")")));
    }
    t.threads = std::move(joined);
  }
  return t;
}

absl::Status Cgroups::MoveThreadsBack(int pid, const Throttle& throttle,
                                      std::vector<std::string>* notes) {
  absl::StatusOr<std::string> tasks = runner_->ReadFile(throttle.cgroup + "/tasks");
  if (!tasks.ok()) return tasks.status();
  std::vector<int> ended;
  for (const ThreadOrigin& th : throttle.threads) ended.push_back(th.tid);
  std::vector<std::string> gone_origins;
  for (absl::string_view line : absl::StrSplit(*tasks, '\n', absl::SkipWhitespace())) {
    int tid = 0;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(line), &tid)) continue;
    ended.erase(std::remove(ended.begin(), ended.end(), tid), ended.end());
    std::string origin = throttle.origin;  // A thread started meanwhile: the first's origin.
    for (const ThreadOrigin& th : throttle.threads) {
      if (th.tid == tid) origin = th.origin;
    }
    std::string to = Dir(origin);
    if (!runner_->Exists(to)) {
      if (!absl::c_linear_search(gone_origins, origin)) gone_origins.push_back(origin);
      to = hierarchy_.root;
    }
    absl::Status s = runner_->WriteFile(to + "/tasks", absl::StrCat(tid));
    if (!s.ok()) {
      if (!runner_->Exists(ProcPath(pid, absl::StrCat("task/", tid)))) {
        ended.push_back(tid);  // It ended between the read and the write.
        continue;
      }
      return s;
    }
  }
  for (const std::string& o : gone_origins) {
    notes->push_back(absl::StrCat("cgroup ", o, " is gone: its threads moved to the root"));
  }
  if (!ended.empty() && runner_->Exists(ProcPath(pid, "status"))) {
    std::sort(ended.begin(), ended.end());
    notes->push_back(absl::StrCat(ended.size() == 1 ? "thread " : "threads ",
                                  absl::StrJoin(ended, ", "), " of process ", pid, " had ended"));
  }
  return absl::OkStatus();
}

absl::Status Cgroups::MoveAll(const std::string& from, const std::string& to, int* gone) {
  absl::StatusOr<std::string> procs = runner_->ReadFile(from + "/cgroup.procs");
  if (!procs.ok()) return procs.status();
  for (absl::string_view p : absl::StrSplit(*procs, '\n', absl::SkipWhitespace())) {
    const std::string pid(absl::StripAsciiWhitespace(p));
    absl::Status s = runner_->WriteFile(to + "/cgroup.procs", pid);
    if (!s.ok()) {
      if (!runner_->Exists(absl::StrCat("/proc/", pid, "/status"))) {
        ++*gone;  // It ended between the read and the write.
        continue;
      }
      return s;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> Cgroups::Release(int pid, const Throttle& throttle) {
  const std::string what = absl::StrCat("releasing pid ", pid, " from ", throttle.cgroup);
  std::vector<std::string> notes;
  if (!runner_->Exists(throttle.cgroup)) return std::string("the cgroup was already removed");
  if (!runner_->Exists(ProcPath(pid, "status"))) {
    notes.push_back(absl::StrCat("process ", pid, " had exited"));
  }
  if (!throttle.threads.empty()) {
    if (absl::Status s = MoveThreadsBack(pid, throttle, &notes); !s.ok()) {
      return Annotate(s, what);
    }
  } else {
    std::string to = Dir(throttle.origin);
    if (!runner_->Exists(to)) {
      notes.push_back(absl::StrCat("its cgroup ", throttle.origin, " is gone: moved to the root"));
      to = hierarchy_.root;
    }
    int gone = 0;
    if (absl::Status s = MoveAll(throttle.cgroup, to, &gone); !s.ok()) return Annotate(s, what);
  }
  // A task that is exiting can keep the cgroup busy for a moment.
  absl::Status removed;
  for (int attempt = 0; attempt < 50; ++attempt) {
    removed = runner_->RemoveDir(throttle.cgroup);
    if (removed.code() != absl::ErrnoToStatusCode(EBUSY)) break;
    absl::SleepFor(absl::Milliseconds(20));
  }
  if (!removed.ok()) return Annotate(removed, what);
  return absl::StrJoin(notes, "; ");
}

absl::StatusOr<std::vector<std::string>> Cgroups::RemoveChaosCgroups(
    const std::function<bool(const ChaosCgroupName&)>& select) {
  absl::StatusOr<std::vector<std::string>> names = runner_->ListDir(hierarchy_.root);
  if (!names.ok()) return names.status();
  std::vector<std::string> removed;
  for (const std::string& name : *names) {
    std::optional<ChaosCgroupName> parsed = ParseChaosCgroupName(name);
    if (!parsed.has_value() || !select(*parsed)) continue;
    const std::string dir = hierarchy_.root + "/" + name;
    int gone = 0;
    if (absl::Status s = MoveAll(dir, hierarchy_.root, &gone); !s.ok()) {
      return Annotate(s, absl::StrCat("emptying ", dir));
    }
    if (absl::Status s = runner_->RemoveDir(dir); !s.ok()) return s;
    removed.push_back(dir);
  }
  return removed;
}

}  // namespace falcon::chaos
