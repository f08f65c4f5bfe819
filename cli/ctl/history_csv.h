// `falconctl export JOB`: the job's iteration-time history (GetHistory) with event marks.
//
// CSV header: iteration,time_ns,iteration_time_s,plan_version,event_id,mark
//   one row per history point; `mark` is onset|alarm|verdict|action|recovery of event `event_id`
//   on the row of the first point at or after the mark's iteration (history may be downsampled);
//   several marks on one row are joined with ';' in both columns, pairwise, in iteration order.
//   Marks before the first point or after the last one are left out.
#ifndef FALCON_CLI_CTL_HISTORY_CSV_H_
#define FALCON_CLI_CTL_HISTORY_CSV_H_

#include <cstdint>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "proto/falcon/v1/control.pb.h"

namespace falcon::cli::ctl {

struct EventMark {
  int64_t iteration = 0;
  uint64_t event_id = 0;
  std::string mark;  // onset, alarm, verdict, action, recovery.
};

struct MarkedPoint {
  falcon::v1::HistoryPoint point;
  std::vector<EventMark> marks;
};

// Every mark of `events` (iterations < 0 skipped), ordered by iteration, then timeline order.
std::vector<EventMark> EventMarks(
    const google::protobuf::RepeatedPtrField<falcon::v1::Event>& events);
std::vector<MarkedPoint> MarkHistory(const falcon::v1::GetHistoryResponse& history);

std::string HistoryCsv(const falcon::v1::GetHistoryResponse& history);
// {"job": JOB, "points": [{"iteration","time_ns","iteration_time_s","plan_version",
//  "marks":[{"event_id","mark"}]}], "events": [Event...]}
nlohmann::json HistoryJson(const std::string& job, const falcon::v1::GetHistoryResponse& history);

}  // namespace falcon::cli::ctl

#endif  // FALCON_CLI_CTL_HISTORY_CSV_H_
