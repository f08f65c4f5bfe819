#include "cli/ctl/history_csv.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "cli/ctl/format.h"

namespace falcon::cli::ctl {

std::vector<EventMark> EventMarks(
    const google::protobuf::RepeatedPtrField<falcon::v1::Event>& events) {
  std::vector<EventMark> marks;
  for (const auto& e : events) {
    auto add = [&](int64_t iteration, const char* mark) {
      if (iteration >= 0) marks.push_back({iteration, e.event_id(), mark});
    };
    add(e.onset_iteration(), "onset");
    add(e.alarm_iteration(), "alarm");
    add(e.verdict_iteration(), "verdict");
    for (const auto& a : e.actions()) add(a.iteration(), "action");
    add(e.recovery_iteration(), "recovery");
  }
  std::stable_sort(marks.begin(), marks.end(), [](const EventMark& a, const EventMark& b) {
    return a.iteration < b.iteration;
  });
  return marks;
}

std::vector<MarkedPoint> MarkHistory(const falcon::v1::GetHistoryResponse& history) {
  std::vector<MarkedPoint> rows;
  rows.reserve(history.points_size());
  for (const auto& p : history.points()) rows.push_back({p, {}});
  if (rows.empty()) return rows;
  for (const EventMark& m : EventMarks(history.events())) {
    if (m.iteration < rows.front().point.iteration()) continue;
    auto it = std::lower_bound(
        rows.begin(), rows.end(), m.iteration,
        [](const MarkedPoint& r, int64_t iteration) { return r.point.iteration() < iteration; });
    if (it == rows.end()) continue;
    it->marks.push_back(m);
  }
  return rows;
}

std::string HistoryCsv(const falcon::v1::GetHistoryResponse& history) {
  std::string out = "iteration,time_ns,iteration_time_s,plan_version,event_id,mark\n";
  for (const MarkedPoint& r : MarkHistory(history)) {
    std::vector<std::string> ids, marks;
    for (const EventMark& m : r.marks) {
      ids.push_back(absl::StrCat(m.event_id));
      marks.push_back(m.mark);
    }
    absl::StrAppend(&out, r.point.iteration(), ",", r.point.time_ns(), ",",
                    absl::StrFormat("%.6f", r.point.iteration_time_ns() / 1e9), ",",
                    r.point.plan_version(), ",", absl::StrJoin(ids, ";"), ",",
                    absl::StrJoin(marks, ";"), "\n");
  }
  return out;
}

nlohmann::json HistoryJson(const std::string& job, const falcon::v1::GetHistoryResponse& history) {
  nlohmann::json points = nlohmann::json::array();
  for (const MarkedPoint& r : MarkHistory(history)) {
    nlohmann::json marks = nlohmann::json::array();
    for (const EventMark& m : r.marks)
      marks.push_back({{"event_id", m.event_id}, {"mark", m.mark}});
    points.push_back({{"iteration", r.point.iteration()},
                      {"time_ns", r.point.time_ns()},
                      {"iteration_time_s", r.point.iteration_time_ns() / 1e9},
                      {"plan_version", r.point.plan_version()},
                      {"marks", std::move(marks)}});
  }
  nlohmann::json events = nlohmann::json::array();
  for (const auto& e : history.events()) events.push_back(ToJson(e));
  return {{"job", job}, {"points", std::move(points)}, {"events", std::move(events)}};
}

}  // namespace falcon::cli::ctl
