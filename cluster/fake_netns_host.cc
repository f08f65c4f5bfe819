#include "cluster/fake_netns_host.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace falcon::cluster {
namespace {

common::CommandResult Ok(std::string out = "") {
  common::CommandResult r;
  r.stdout_text = std::move(out);
  return r;
}

common::CommandResult Failed(std::string err) {
  common::CommandResult r;
  r.status = common::ExitStatus::Exited(2);
  r.stderr_text = std::move(err);
  return r;
}

std::string JsonNames(const std::set<std::string>& names, const char* key) {
  std::vector<std::string> entries;
  for (const std::string& n : names) entries.push_back(absl::StrCat("{\"", key, "\":\"", n, "\"}"));
  return absl::StrCat("[", absl::StrJoin(entries, ","), "]\n");
}

}  // namespace

std::vector<std::string> FakeNetnsHost::TakeCommands() { return std::exchange(commands, {}); }

absl::StatusOr<common::CommandResult> FakeNetnsHost::Run(const std::vector<std::string>& a) {
  const std::string line = common::CommandLine(a);
  commands.push_back(line);
  if (!a.empty() && missing_programs.count(a[0]) > 0) {
    return absl::NotFoundError(absl::StrCat("cannot execute '", a[0], "': No such file"));
  }
  if (!fail_on.empty() && absl::StrContains(line, fail_on)) return Failed(fail_stderr);
  if (line == "ip -j link show") return Ok(JsonNames(links, "ifname"));
  if (line == "ip -j netns list") return Ok(JsonNames(netns, "name"));
  if (line == "ip -j -4 addr show") {
    std::string out = addr_json.substr(0, addr_json.rfind(']'));
    for (const auto& [link, cidr] : added_addrs) {
      const size_t slash = cidr.find('/');
      absl::StrAppend(&out, out.size() > 1 ? "," : "", "{\"ifname\":\"", link,
                      "\",\"addr_info\":[{\"local\":\"", cidr.substr(0, slash),
                      "\",\"prefixlen\":", cidr.substr(slash + 1), "}]}");
    }
    return Ok(out + "]");
  }
  if (a.size() == 6 && a[0] == "ip" && a[1] == "addr" && a[2] == "add" && a[4] == "dev") {
    added_addrs[a[5]] = a[3];
    return Ok();
  }
  if (line == "ip -j -4 route show table all") return Ok(route_json);
  if (a.size() >= 4 && a[0] == "ip" && a[1] == "link" && a[2] == "add") {
    if (!links.insert(a[3]).second) return Failed("RTNETLINK answers: File exists");
    return Ok();
  }
  if (a.size() == 4 && a[0] == "ip" && a[1] == "link" && a[2] == "del") {
    if (links.erase(a[3]) == 0) return Failed(absl::StrCat("Cannot find device \"", a[3], "\""));
    added_addrs.erase(a[3]);
    return Ok();
  }
  if (a.size() == 4 && a[0] == "ip" && a[1] == "netns" && a[2] == "add") {
    if (!netns.insert(a[3]).second) return Failed("Cannot create namespace file: File exists");
    return Ok();
  }
  if (a.size() == 4 && a[0] == "ip" && a[1] == "netns" && a[2] == "del") {
    if (netns.erase(a[3]) == 0) return Failed("Cannot remove namespace file: No such file");
    return Ok();
  }
  auto out = outputs.find(line);
  return Ok(out == outputs.end() ? "" : out->second);
}

absl::Status FakeNetnsHost::ProbeTcp(const std::string& connect_netns,
                                     const std::string& listen_netns,
                                     const std::string& listen_address, absl::Duration timeout) {
  probes.push_back({connect_netns, listen_netns, listen_address});
  if (fail_probe && fail_probe(probes.back())) {
    return absl::DeadlineExceededError(absl::StrCat("TCP from ", connect_netns, " to ",
                                                    listen_address, ":1: connect timed out after ",
                                                    absl::FormatDuration(timeout)));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> FakeNetnsHost::ReadFile(const std::string& path) {
  auto it = files.find(path);
  if (it == files.end()) return absl::NotFoundError(absl::StrCat(path, ": cannot open file"));
  return it->second;
}

}  // namespace falcon::cluster
