#include "chaos/tc.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace falcon::chaos {
namespace {

std::string ClassId(int slot) { return absl::StrCat(Tc::kHandle, absl::Hex(slot)); }

}  // namespace

std::string Interface::ToString() const { return netns.empty() ? dev : netns + "/" + dev; }

std::vector<std::string> Tc::Argv(const Interface& iface, std::vector<std::string> args) {
  std::vector<std::string> argv = {"tc"};
  if (!iface.netns.empty()) {
    argv.push_back("-n");
    argv.push_back(iface.netns);
  }
  for (std::string& a : args) argv.push_back(std::move(a));
  return argv;
}

absl::StatusOr<CommandResult> Tc::Run(const Interface& iface, std::vector<std::string> args) {
  const std::vector<std::string> argv = Argv(iface, std::move(args));
  absl::StatusOr<CommandResult> r = runner_->Run(argv);
  if (!r.ok()) {
    return absl::Status(r.status().code(),
                        absl::StrCat(absl::StrJoin(argv, " "), ": ", r.status().message()));
  }
  if (r->exit_code != 0) {
    return absl::FailedPreconditionError(absl::StrCat(absl::StrJoin(argv, " "), ": exit ",
                                                      r->exit_code, ": ",
                                                      absl::StripAsciiWhitespace(r->stderr_text)));
  }
  return r;
}

absl::Status Tc::AddHtbRoot(const Interface& iface) {
  return Run(iface, {"qdisc", "add", "dev", iface.dev, "root", "handle", kHandle, "htb"}).status();
}

absl::Status Tc::AddLinkClass(const Interface& iface, int slot, int64_t rate_bit_per_second,
                              int64_t burst_bytes, const std::string& dst_address) {
  const std::string rate = absl::StrCat(rate_bit_per_second, "bit");
  const std::string burst = absl::StrCat(burst_bytes);
  absl::Status s =
      Run(iface, {"class", "add", "dev", iface.dev, "parent", kHandle, "classid", ClassId(slot),
                  "htb", "rate", rate, "ceil", rate, "burst", burst, "cburst", burst})
          .status();
  if (!s.ok()) return s;
  s = Run(iface, {"filter", "add", "dev", iface.dev, "parent", kHandle, "protocol", "ip", "prio",
                  absl::StrCat(slot), "u32", "match", "ip", "dst", dst_address + "/32", "flowid",
                  ClassId(slot)})
          .status();
  if (!s.ok()) {
    // Leave no class without its filter behind.
    (void)Run(iface, {"class", "del", "dev", iface.dev, "classid", ClassId(slot)});
  }
  return s;
}

absl::Status Tc::RemoveLinkClass(const Interface& iface, int slot) {
  absl::Status s = Run(iface, {"filter", "del", "dev", iface.dev, "parent", kHandle, "protocol",
                               "ip", "prio", absl::StrCat(slot)})
                       .status();
  if (!s.ok()) return s;
  return Run(iface, {"class", "del", "dev", iface.dev, "classid", ClassId(slot)}).status();
}

absl::Status Tc::AddTbfRoot(const Interface& iface, int64_t rate_bit_per_second,
                            int64_t burst_bytes) {
  return Run(iface, {"qdisc", "add", "dev", iface.dev, "root", "handle", kHandle, "tbf", "rate",
                     absl::StrCat(rate_bit_per_second, "bit"), "burst", absl::StrCat(burst_bytes),
                     "latency", "100ms"})
      .status();
}

absl::Status Tc::DeleteRoot(const Interface& iface) {
  return Run(iface, {"qdisc", "del", "dev", iface.dev, "root"}).status();
}

absl::StatusOr<bool> Tc::HasChaosRoot(const Interface& iface) {
  absl::StatusOr<CommandResult> r = Run(iface, {"qdisc", "show", "dev", iface.dev, "root"});
  if (!r.ok()) return r.status();
  // "qdisc htb fa1c: root refcnt 3 ..." (one line per root qdisc; `root` filters the rest).
  for (absl::string_view line : absl::StrSplit(r->stdout_text, '\n', absl::SkipEmpty())) {
    std::vector<absl::string_view> words = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (words.size() >= 4 && words[0] == "qdisc" && words[2] == kHandle && words[3] == "root") {
      return true;
    }
  }
  return false;
}

bool Tc::IsGone(const absl::Status& status) {
  return absl::StrContains(status.message(), "Cannot find device") ||
         absl::StrContains(status.message(), "Cannot open network namespace");
}

bool Tc::IsNoQdisc(const absl::Status& status) {
  return absl::StrContains(status.message(), "Cannot delete qdisc with handle of zero") ||
         absl::StrContains(status.message(), "Invalid handle");
}

}  // namespace falcon::chaos
