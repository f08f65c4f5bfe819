// The controller's side of environment shifts (docs/algorithms.md#environment-shifts): keeps the
// compute time every rank reports per iteration (IterationSummary.compute_ns, the time outside
// communication ops) for the last kBeforeIterations + lag + 8 iterations of each job, and judges
// a verified slowdown of one of the job's series with analysis/detect/environment_shift.h over
// the two stretches the detector compared (the stretch before capped at its last
// kBeforeIterations).
//
// A slowdown of the job series judged an environment shift is remembered with its baseline (every
// rank's compute before it) while the job series stays slowed: each later job iteration is
// offered to ObserveLeft, which tells when the environment has receded (every rank's compute back
// near its baseline) while the job stays at least twice the threshold above its healthy level (a
// fail-slow that began with the load, or outlasted it): that slowdown opens an event.
// Compute is not stored: after a controller restart the history starts empty and nothing is an
// environment shift until it has refilled. Not thread-safe (controller loop only).
#ifndef FALCON_CONTROLLER_DETECTION_ENVIRONMENT_GATE_H_
#define FALCON_CONTROLLER_DETECTION_ENVIRONMENT_GATE_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "analysis/detect/environment_shift.h"
#include "analysis/detect/online_detector.h"
#include "controller/registry/job_registry.h"

namespace falcon::controller::detection {

class EnvironmentGate {
 public:
  // At most this many iterations of the stretch before a change are compared.
  static constexpr int64_t kBeforeIterations = 64;
  // Iterations of the job series at its slowed level that ObserveLeft judges: twice the online
  // detector's default min_after (a healthy run's load dipped for 5 iterations, compute back and
  // the job still 30% slow, then came back: judged on 5, that dip opened an event).
  static constexpr size_t kLeftIterations = 10;
  // What is left must be this many verification thresholds above the healthy level.
  static constexpr double kLeftThresholds = 2.0;

  // `after_iterations`: the longest stretch after a change the detector decides on (its lag),
  // clamped to [1, 1000].
  explicit EnvironmentGate(int after_iterations = 10);

  // Records `rank`'s compute time at `iteration`. Values <= 0 (no op timing) are not recorded.
  void AddCompute(const std::string& job, uint32_t rank, int64_t iteration, int64_t compute_ns);
  // Records one member's transfer time of communicator `comm_id` at `iteration`; the
  // communicator's value there is the slowest member's. Values <= 0 are not recorded.
  void AddTransfer(const std::string& job, uint64_t comm_id, int64_t iteration,
                   int64_t transfer_ns);

  // Judges the slowdown `ev` (kSlowdown) of a series of `job` at verification ratio `threshold`
  // over [before_iteration, before_end_iteration) (its last kBeforeIterations; the stretch
  // verification compared) and [iteration, decided_at]. The columns are `job`'s registered ranks
  // with their pipeline stage (RankInfo.pp_index). A slowdown that compute calls the environment's
  // is not when a communicator's transfer time stands out (analysis::detect::FindCommStandout) over
  // the same stretches. When `remember` and the slowdown is an environment shift, its baseline is
  // remembered unless one is (the first shift's: compute at the healthy level). kInvalidArgument:
  // threshold out of (0, 10] or a ratio <= 0.
  absl::StatusOr<analysis::detect::EnvironmentJudgement> JudgeSlowdown(
      const registry::JobEntry& job, const analysis::detect::DetectorEvent& ev, double threshold,
      bool remember);

  // Whether an environment shift of `job` is remembered.
  bool HasShift(const std::string& job) const;
  void ForgetShift(const std::string& job);

  // One more job iteration (time `value` s) while a shift is remembered; `healthy` is the job
  // series' healthy level (s). Returns a slowdown (kSlowdown from `healthy` to the mean of the
  // latest kLeftIterations, over them) while they are a level kLeftThresholds x `threshold`
  // above `healthy` as the online detector verifies one (mean, median, and the latest 3 holding)
  // and either
  //  - the environment has receded: the typical compute of each of them within half the
  //    threshold of the remembered baseline, or
  //  - the environment no longer explains the slowdown: the median typical compute over them,
  //    E, rose less than analysis::detect::kMaxAmplification allows for the job's median ratio r
  //    (E - 1 < (r - 1) / kMaxAmplification; a fault that began with a load which stays, as the
  //    shift was judged on the few iterations after the change);
  // the shift is then forgotten. nullopt otherwise, and when nothing is remembered.
  std::optional<analysis::detect::DetectorEvent> ObserveLeft(const std::string& job,
                                                             int64_t iteration, double value,
                                                             double healthy, double threshold);

  void RemoveJob(const std::string& job) { jobs_.erase(job); }
  // Measurements of a job's stretches made by JudgeSlowdown so far (each costs O(ranks x
  // iterations); the series that decide on stretches measured already reuse them).
  int64_t measurements() const { return measurements_; }
  size_t MemoryBytes() const;

 private:
  // One rank's compute_ns, or one communicator's transfer_ns, by iteration modulo the capacity.
  struct Ring {
    std::vector<int64_t> iteration;
    std::vector<int64_t> value_ns;
  };
  struct Shift {
    std::vector<uint32_t> ranks;  // Column order of the baseline.
    analysis::detect::ComputeBaseline baseline;
    int64_t before_iteration = -1;
    std::deque<std::pair<int64_t, double>> latest;  // (iteration, job time s), kLeftIterations.
  };
  // A judgement's measurement, reused by the other series of the job that decide on the same
  // stretches (every series sees the same shift).
  struct Measured {
    int64_t from = -1, until = -1, iteration = -1, decided_at = -1;
    double threshold = 0;
    std::vector<uint32_t> ranks;
    analysis::detect::ComputeBaseline baseline;
    analysis::detect::ComputeStretch after;
  };
  struct JobState {
    absl::flat_hash_map<uint32_t, Ring> ranks;
    absl::flat_hash_map<uint64_t, Ring> comms;
    std::optional<Shift> shift;
    // The latest kMaxMeasured measurements, newest last: the rank series of a fleet-sized job
    // decide on a few different stretches (their change points differ by an iteration or two),
    // and one slot would be measured again for each of thousands of series in turn.
    std::vector<Measured> measured;
  };
  static constexpr size_t kMaxMeasured = 8;

  // The slot of `iteration` in `ring`, allocating the ring on first use.
  size_t SlotOf(Ring& ring, int64_t iteration) const;
  // Transfer times of every communicator over [from, until) and [iteration, to).
  analysis::detect::CommStretches Transfers(const JobState& state, int64_t from, int64_t until,
                                            int64_t iteration, int64_t to) const;
  // Compute of `ranks` (columns) over iterations [from, to); NaN where missing.
  analysis::detect::ComputeStretch Stretch(const JobState& state,
                                           const std::vector<uint32_t>& ranks, int64_t from,
                                           int64_t to) const;

  const size_t capacity_;
  absl::flat_hash_map<std::string, JobState> jobs_;
  int64_t measurements_ = 0;
};

}  // namespace falcon::controller::detection

#endif  // FALCON_CONTROLLER_DETECTION_ENVIRONMENT_GATE_H_
