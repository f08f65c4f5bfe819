#include "controller/detection/job_series.h"

#include <algorithm>

namespace falcon::controller::detection {

void JobSeriesAssembler::Emit(std::map<int64_t, JobPoint>::iterator it,
                              std::vector<JobPoint>* out) {
  last_completed_ = it->first;
  out->push_back(it->second);
  pending_.erase(it);
}

void JobSeriesAssembler::Add(int64_t iteration, int64_t iteration_time_ns, int64_t plan_version,
                             std::vector<JobPoint>* out) {
  if (iteration <= last_completed_) return;
  JobPoint& p = pending_[iteration];
  p.iteration = iteration;
  p.iteration_time_ns = std::max(p.iteration_time_ns, iteration_time_ns);
  p.plan_version = std::max(p.plan_version, plan_version);
  ++p.ranks_reported;
  // Ranks report in increasing order, so once every rank reported `iteration`, no rank will
  // report an older pending one: complete everything up to it, in order.
  if (p.ranks_reported >= expected_) {
    while (!pending_.empty() && pending_.begin()->first <= iteration) Emit(pending_.begin(), out);
  }
  while (pending_.size() > max_pending_) Emit(pending_.begin(), out);
}

}  // namespace falcon::controller::detection
