// Builds the job's iteration-time series from per-rank summaries: the job iteration time of
// iteration i is the largest time any rank reported for i (in synchronous training the slowest
// rank sets the pace). An iteration is complete once every registered rank reported it; then
// every older pending iteration is complete too (ranks report in order, so a rank that skipped
// it will not send it). While a rank is silent, the oldest incomplete iteration is completed
// anyway once more than `max_pending` are waiting. Not thread-safe.
#ifndef FALCON_CONTROLLER_DETECTION_JOB_SERIES_H_
#define FALCON_CONTROLLER_DETECTION_JOB_SERIES_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <vector>

namespace falcon::controller::detection {

struct JobPoint {
  int64_t iteration = 0;
  int64_t iteration_time_ns = 0;  // Max over the ranks that reported it.
  int64_t plan_version = 0;       // Max over those ranks.
  uint32_t ranks_reported = 0;
};

class JobSeriesAssembler {
 public:
  explicit JobSeriesAssembler(uint32_t expected_ranks = 1, size_t max_pending = 64)
      : expected_(expected_ranks == 0 ? 1 : expected_ranks), max_pending_(max_pending) {}

  // Number of ranks that report each iteration (the registered ranks).
  void set_expected_ranks(uint32_t n) { expected_ = n == 0 ? 1 : n; }
  uint32_t expected_ranks() const { return expected_; }

  // Adds one rank's time for `iteration`; appends completed iterations to `out` in increasing
  // order. Iterations at or below the last completed one are ignored (late stragglers).
  void Add(int64_t iteration, int64_t iteration_time_ns, int64_t plan_version,
           std::vector<JobPoint>* out);

  int64_t last_completed() const { return last_completed_; }
  size_t pending() const { return pending_.size(); }

 private:
  void Emit(std::map<int64_t, JobPoint>::iterator it, std::vector<JobPoint>* out);

  uint32_t expected_;
  size_t max_pending_;
  int64_t last_completed_ = -1;
  std::map<int64_t, JobPoint> pending_;
};

}  // namespace falcon::controller::detection

#endif  // FALCON_CONTROLLER_DETECTION_JOB_SERIES_H_
