#include "fleet/scenario.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace falcon::fleet {

std::vector<std::pair<size_t, uint32_t>> Scenario::Nodes() const {
  std::vector<std::pair<size_t, uint32_t>> nodes;
  for (size_t j = 0; j < jobs.size(); ++j) {
    for (uint32_t n = 0; n < jobs[j].layout.nodes(); ++n) nodes.emplace_back(j, n);
  }
  return nodes;
}

uint64_t Scenario::Ranks() const {
  uint64_t n = 0;
  for (const JobSpec& j : jobs) n += j.layout.world();
  return n;
}

std::string EncodeScenario(const Scenario& s) {
  std::vector<std::string> jobs;
  for (const JobSpec& j : s.jobs) {
    const Layout& l = j.layout;
    std::string fault = "-";
    if (j.fault.kind != Fault::Kind::kNone) {
      fault = absl::StrCat(j.fault.kind == Fault::Kind::kCompute ? "c" : "l", ":", j.fault.rank,
                           ":", j.fault.factor, ":", j.fault.onset);
    }
    jobs.push_back(
        absl::StrCat(l.job, ",", l.tp, ",", l.pp, ",", l.dp, ",", l.ranks_per_node, ",", fault));
  }
  return absl::StrJoin(jobs, ";");
}

absl::StatusOr<Scenario> ParseScenario(const std::string& text) {
  Scenario s;
  for (absl::string_view job : absl::StrSplit(text, ';', absl::SkipEmpty())) {
    std::vector<std::string> f = absl::StrSplit(job, ',');
    if (f.size() != 6) {
      return absl::InvalidArgumentError(absl::StrCat("job '", job, "': want 6 fields"));
    }
    JobSpec j;
    j.layout.job = f[0];
    if (!absl::SimpleAtoi(f[1], &j.layout.tp) || !absl::SimpleAtoi(f[2], &j.layout.pp) ||
        !absl::SimpleAtoi(f[3], &j.layout.dp) ||
        !absl::SimpleAtoi(f[4], &j.layout.ranks_per_node) || j.layout.tp == 0 || j.layout.pp == 0 ||
        j.layout.dp == 0 || j.layout.ranks_per_node == 0) {
      return absl::InvalidArgumentError(absl::StrCat("job '", f[0], "': bad tp, pp, dp or rpn"));
    }
    if (f[5] != "-") {
      std::vector<std::string> p = absl::StrSplit(f[5], ':');
      if (p.size() != 4 || (p[0] != "c" && p[0] != "l") || !absl::SimpleAtoi(p[1], &j.fault.rank) ||
          !absl::SimpleAtod(p[2], &j.fault.factor) || !absl::SimpleAtoi(p[3], &j.fault.onset) ||
          j.fault.rank >= j.layout.world() || j.fault.factor <= 1) {
        return absl::InvalidArgumentError(absl::StrCat("job '", f[0], "': bad fault '", f[5], "'"));
      }
      j.fault.kind = p[0] == "c" ? Fault::Kind::kCompute : Fault::Kind::kLink;
      if (j.fault.kind == Fault::Kind::kLink && j.layout.dp < 2) {
        return absl::InvalidArgumentError(
            absl::StrCat("job '", f[0], "': a link fault needs dp >= 2"));
      }
    }
    s.jobs.push_back(std::move(j));
  }
  if (s.jobs.empty()) return absl::InvalidArgumentError("scenario: no jobs");
  return s;
}

}  // namespace falcon::fleet
