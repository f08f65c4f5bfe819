#include "controller/detection/environment_gate.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <utility>

#include "absl/strings/str_format.h"
#include "absl/types/span.h"
#include "common/stats.h"

namespace falcon::controller::detection {

using analysis::detect::ComputeBaseline;
using analysis::detect::ComputeStretch;
using analysis::detect::DetectorEvent;
using analysis::detect::EnvironmentJudgement;
using analysis::detect::EnvironmentOptions;

EnvironmentGate::EnvironmentGate(int after_iterations)
    : capacity_(static_cast<size_t>(kBeforeIterations) +
                static_cast<size_t>(std::clamp(after_iterations, 1, 1000)) + 8) {}

size_t EnvironmentGate::SlotOf(Ring& ring, int64_t iteration) const {
  if (ring.iteration.empty()) {
    ring.iteration.assign(capacity_, -1);
    ring.value_ns.assign(capacity_, 0);
  }
  return static_cast<size_t>(iteration) % capacity_;
}

void EnvironmentGate::AddCompute(const std::string& job, uint32_t rank, int64_t iteration,
                                 int64_t compute_ns) {
  if (compute_ns <= 0 || iteration < 0) return;
  Ring& ring = jobs_[job].ranks[rank];
  const size_t slot = SlotOf(ring, iteration);
  ring.iteration[slot] = iteration;
  ring.value_ns[slot] = compute_ns;
  // A late value inside stretches measured makes them stale.
  for (Measured& m : jobs_[job].measured) {
    if (iteration >= m.from && iteration <= m.decided_at) m.from = -1;
  }
}

void EnvironmentGate::AddTransfer(const std::string& job, uint64_t comm_id, int64_t iteration,
                                  int64_t transfer_ns) {
  if (transfer_ns <= 0 || iteration < 0) return;
  Ring& ring = jobs_[job].comms[comm_id];
  const size_t slot = SlotOf(ring, iteration);
  if (ring.iteration[slot] != iteration) {
    ring.iteration[slot] = iteration;
    ring.value_ns[slot] = transfer_ns;
  } else {
    ring.value_ns[slot] = std::max(ring.value_ns[slot], transfer_ns);
  }
}

analysis::detect::CommStretches EnvironmentGate::Transfers(const JobState& state, int64_t from,
                                                           int64_t until, int64_t iteration,
                                                           int64_t to) const {
  analysis::detect::CommStretches out;
  auto values = [&](const Ring& ring, int64_t lo, int64_t hi) {
    std::vector<double> v;
    for (int64_t i = std::max<int64_t>(lo, 0); i < hi; ++i) {
      const size_t slot = static_cast<size_t>(i) % capacity_;
      if (ring.iteration[slot] == i) v.push_back(static_cast<double>(ring.value_ns[slot]));
    }
    return v;
  };
  for (const auto& [comm_id, ring] : state.comms) {
    out.comm_ids.push_back(comm_id);
    out.before.push_back(values(ring, from, until));
    out.after.push_back(values(ring, iteration, to));
  }
  return out;
}

ComputeStretch EnvironmentGate::Stretch(const JobState& state, const std::vector<uint32_t>& ranks,
                                        int64_t from, int64_t to) const {
  ComputeStretch out;
  out.values.resize(ranks.size());
  for (size_t c = 0; c < ranks.size(); ++c) {
    std::vector<double>& column = out.values[c];
    column.assign(static_cast<size_t>(std::max<int64_t>(0, to - from)),
                  std::numeric_limits<double>::quiet_NaN());
    auto it = state.ranks.find(ranks[c]);
    if (it == state.ranks.end()) continue;
    for (int64_t i = std::max<int64_t>(from, 0); i < to; ++i) {
      const size_t slot = static_cast<size_t>(i) % capacity_;
      if (it->second.iteration[slot] == i) {
        column[static_cast<size_t>(i - from)] = static_cast<double>(it->second.value_ns[slot]);
      }
    }
  }
  return out;
}

absl::StatusOr<EnvironmentJudgement> EnvironmentGate::JudgeSlowdown(const registry::JobEntry& job,
                                                                    const DetectorEvent& ev,
                                                                    double threshold,
                                                                    bool remember) {
  EnvironmentOptions options;
  options.min_relative_change = threshold;
  if (absl::Status s = options.Validate(); !s.ok()) return s;
  JobState& state = jobs_[job.name()];
  // The stretch before as verification compared it: it may end before the change's iteration
  // (a change placed at min_gap, online_detector.h).
  const int64_t until =
      ev.before_end_iteration > ev.before_iteration && ev.before_end_iteration <= ev.iteration
          ? ev.before_end_iteration
          : ev.iteration;
  const int64_t from = std::max(ev.before_iteration, until - kBeforeIterations);
  // Every series of the job decides on nearly the same stretches: measured once for them.
  auto found = std::find_if(state.measured.begin(), state.measured.end(), [&](const Measured& c) {
    return c.from == from && c.until == until && c.iteration == ev.iteration &&
           c.decided_at == ev.decided_at && c.ranks == job.ranks();
  });
  if (found == state.measured.end()) {
    // A stale entry first, else a new one (the oldest goes beyond kMaxMeasured).
    found = std::find_if(state.measured.begin(), state.measured.end(),
                         [](const Measured& c) { return c.from < 0; });
    if (found == state.measured.end()) {
      if (state.measured.size() >= kMaxMeasured) state.measured.erase(state.measured.begin());
      state.measured.emplace_back();
      found = std::prev(state.measured.end());
    }
  }
  Measured& m = *found;
  if (m.from != from || m.until != until) {
    ++measurements_;
    std::vector<int32_t> stages;
    stages.reserve(job.ranks().size());
    for (uint32_t r : job.ranks()) {
      const falcon::v1::RankInfo* info = job.FindRank(r);
      stages.push_back(info == nullptr ? -1 : info->pp_index());
    }
    absl::StatusOr<ComputeBaseline> baseline =
        analysis::detect::MeasureBaseline(stages, Stretch(state, job.ranks(), from, until));
    if (!baseline.ok()) return baseline.status();
    m.from = from;
    m.until = until;
    m.iteration = ev.iteration;
    m.decided_at = ev.decided_at;
    m.ranks = job.ranks();
    m.baseline = *std::move(baseline);
    m.after = Stretch(state, m.ranks, ev.iteration, ev.decided_at + 1);
  }
  absl::StatusOr<EnvironmentJudgement> j =
      analysis::detect::JudgeEnvironment(ev.ratio, m.baseline, m.after, options);
  if (j.ok() && j->environment) {
    absl::StatusOr<analysis::detect::CommStandout> comm = analysis::detect::FindCommStandout(
        Transfers(state, from, until, ev.iteration, ev.decided_at + 1), threshold,
        (ev.mean_after - ev.mean_before) * 1e9);
    if (!comm.ok()) return comm.status();
    if (comm->stands_out) {
      j->environment = false;
      j->reason = absl::StrFormat(
          "communicator %d's transfers rose x%.2f, the other communicators' x%.2f: a link, not "
          "the environment (compute rose alike: typical x%.2f)",
          comm->comm_id, comm->factor, comm->others, j->factor);
    }
  }
  if (j.ok() && j->environment && remember && !state.shift.has_value()) {
    Shift shift;
    shift.ranks = m.ranks;
    shift.baseline = m.baseline;
    shift.before_iteration = from;
    state.shift = std::move(shift);
  }
  return j;
}

bool EnvironmentGate::HasShift(const std::string& job) const {
  auto it = jobs_.find(job);
  return it != jobs_.end() && it->second.shift.has_value();
}

void EnvironmentGate::ForgetShift(const std::string& job) {
  auto it = jobs_.find(job);
  if (it != jobs_.end()) it->second.shift.reset();
}

std::optional<DetectorEvent> EnvironmentGate::ObserveLeft(const std::string& job, int64_t iteration,
                                                          double value, double healthy,
                                                          double threshold) {
  auto it = jobs_.find(job);
  if (it == jobs_.end() || !it->second.shift.has_value() || !(healthy > 0)) return std::nullopt;
  JobState& state = it->second;
  Shift& shift = *state.shift;
  shift.latest.emplace_back(iteration, value);
  while (shift.latest.size() > kLeftIterations) shift.latest.pop_front();
  if (shift.latest.size() < kLeftIterations) return std::nullopt;
  std::vector<double> values;
  for (const auto& [i, v] : shift.latest) values.push_back(v);
  // Verified as the online detector verifies a change (online_detector.h): mean and median the
  // threshold up, and the level still holding: the latest 3 values' median the threshold up too,
  // it and the latest value nearer the new level than the healthy one.
  // At kLeftThresholds x the threshold: without BOCD's evidence of a change, after a load that
  // may have left the machine in another steady state (measured: a healthy job 10.7% slower
  // for good after a burst, its compute back), a smaller rise is no sign of a fault.
  const double bar = (1 + kLeftThresholds * threshold) * healthy;
  const double mean = common::Mean(values);
  const double median = common::Median(values);
  const double latest = common::Median(absl::MakeConstSpan(values).last(3));
  const double midpoint = 0.5 * (healthy + median);
  if (median < bar || mean < bar || latest < bar || latest < midpoint || values.back() < midpoint) {
    return std::nullopt;
  }
  // Once the environment has receded: the typical compute back within half the threshold of
  // the baseline in each of these iterations (a stretch across the end of a burst mixes loaded
  // and healthy iterations, and is judged later). While the load lasts, one rank often stands
  // out of its peers by 20-80% for 5 iterations and more (the OS is not fair under load,
  // measured): no sign of a fault then. Or once the load that stays explains the slowdown no
  // longer: a shift is judged on the few iterations after its change, where a load's burst and a
  // fault that began with it mix (measured: a 2 Mbit/s DP link cap under a build's load, job
  // x1.59 with compute x1.07 for 100 iterations, was hidden for the whole run).
  const int64_t first = shift.latest.front().first;
  absl::StatusOr<std::vector<double>> typical = analysis::detect::TypicalCompute(
      shift.baseline, Stretch(state, shift.ranks, first, iteration + 1));
  if (!typical.ok()) return std::nullopt;  // No typical level before: nothing to compare.
  bool receded = true;
  std::vector<double> known;
  for (double e : *typical) {
    if (!(e < 1 + threshold / 2)) receded = false;  // Still loaded, or unknown (NaN).
    if (!std::isnan(e)) known.push_back(e);
  }
  if (!receded) {
    // Measured on at least half of the iterations, as a typical compute needs half the ranks.
    if (known.size() * 2 < typical->size()) return std::nullopt;
    const double environment = common::Median(known);
    const double ratio = median / healthy;
    if (!(environment - 1 < (ratio - 1) / analysis::detect::kMaxAmplification)) {
      return std::nullopt;
    }
  }
  DetectorEvent left;
  left.kind = analysis::detect::ChangeKind::kSlowdown;
  left.iteration = first;
  left.decided_at = iteration;
  left.before_iteration = shift.before_iteration;
  left.mean_before = healthy;
  left.mean_after = mean;
  left.ratio = mean / healthy;
  const absl::Span<const double> last = absl::MakeConstSpan(values).last(
      std::min<size_t>(values.size(), analysis::detect::OnlineDetectorOptions::kPersistence));
  left.latest.assign(last.begin(), last.end());
  state.shift.reset();
  return left;
}

size_t EnvironmentGate::MemoryBytes() const {
  size_t bytes = sizeof(*this);
  auto stretch_bytes = [](const ComputeStretch& s) {
    size_t b = s.values.capacity() * sizeof(std::vector<double>);
    for (const auto& c : s.values) b += c.capacity() * sizeof(double);
    return b;
  };
  auto baseline_bytes = [](const ComputeBaseline& b) {
    return b.stages.capacity() * sizeof(int32_t) + b.rank_levels.capacity() * sizeof(double);
  };
  for (const auto& [name, state] : jobs_) {
    bytes += sizeof(state) + name.capacity();
    for (const auto& [rank, ring] : state.ranks) {
      bytes += sizeof(rank) + sizeof(ring) +
               (ring.iteration.capacity() + ring.value_ns.capacity()) * sizeof(int64_t);
    }
    for (const auto& [comm, ring] : state.comms) {
      bytes += sizeof(comm) + sizeof(ring) +
               (ring.iteration.capacity() + ring.value_ns.capacity()) * sizeof(int64_t);
    }
    for (const Measured& m : state.measured) {
      bytes += sizeof(m) + m.ranks.capacity() * sizeof(uint32_t) + baseline_bytes(m.baseline) +
               stretch_bytes(m.after);
    }
    if (state.shift.has_value()) {
      bytes += state.shift->ranks.capacity() * sizeof(uint32_t) +
               baseline_bytes(state.shift->baseline) +
               state.shift->latest.size() * sizeof(std::pair<int64_t, double>);
    }
  }
  return bytes;
}

}  // namespace falcon::controller::detection
