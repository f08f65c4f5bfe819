#include "deploy/demo/live.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "deploy/demo/report.h"

namespace falcon::deploy::demo {

std::string JobStateName(falcon::v1::JobState state) {
  if (state == falcon::v1::JOB_STATE_UNSPECIFIED) return "STARTING";
  return std::string(absl::StripPrefix(falcon::v1::JobState_Name(state), "JOB_STATE_"));
}

std::string LiveLine(double elapsed_s, const falcon::v1::Job& job,
                     const std::vector<falcon::v1::Event>& events) {
  std::string line = absl::StrFormat("t=%4.0fs  it %5d  %6.3f s/it  %-10s  ", elapsed_s,
                                     std::max<int64_t>(0, job.last_iteration()),
                                     job.iteration_time_ns() * 1e-9, JobStateName(job.state()));
  if (events.empty()) return line + "-";
  const falcon::v1::Event* e = &events[0];
  for (const auto& ev : events) {
    if (ev.event_id() > e->event_id()) e = &ev;
  }
  std::vector<std::string> culprit;
  for (uint32_t r : e->ranks()) culprit.push_back(absl::StrCat("rank ", r));
  // A node NIC fault names the node; its links are the evidence.
  for (const std::string& n : e->nodes()) culprit.push_back(absl::StrCat(n, "'s NIC"));
  for (const auto& l : e->links()) {
    if (e->nodes_size() > 0) break;
    culprit.push_back(absl::StrCat("link ", l.src_rank(), "->", l.dst_rank()));
  }
  if (culprit.size() > 3) {
    const size_t more = culprit.size() - 2;
    culprit.resize(2);
    culprit.push_back(absl::StrCat("+", more, " more"));
  }
  std::string last_action;
  for (const auto& a : e->actions()) {
    if (a.dry_run() || (a.directive_id() == 0 && a.strategy() != falcon::v1::STRATEGY_S1_IGNORE)) {
      continue;  // Dry runs and skipped rungs.
    }
    last_action = absl::StrCat(a.revert() ? "revert " : "", StrategyName(a.strategy()));
  }
  absl::StrAppendFormat(
      &line, "event %d %s%s x%.2f [%s%s]", e->event_id(),
      e->cause() == falcon::v1::CAUSE_UNSPECIFIED ? "cause ?" : CauseName(e->cause()),
      culprit.empty() ? "" : absl::StrCat(" ", absl::StrJoin(culprit, ", ")), e->slowdown_ratio(),
      absl::StripPrefix(falcon::v1::EventState_Name(e->state()), "EVENT_STATE_"),
      last_action.empty() ? "" : absl::StrCat(", ", last_action));
  if (events.size() > 1) absl::StrAppend(&line, " +", events.size() - 1);
  return line;
}

}  // namespace falcon::deploy::demo
