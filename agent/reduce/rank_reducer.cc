#include "agent/reduce/rank_reducer.h"

#include <algorithm>
#include <utility>

namespace falcon::agent::reduce {

absl::Status RankReducer::Validate(const Options& options) {
  if (options.max_held_ops == 0) return absl::InvalidArgumentError("max_held_ops: must be > 0");
  return analysis::detect::IterationTracker::Create(options.tracker).status();
}

RankReducer::RankReducer(uint32_t rank, Options options)
    : rank_(rank),
      options_(options),
      tracker_(*analysis::detect::IterationTracker::Create(options.tracker)) {}

uint64_t RankReducer::Symbol(const HeldOp& op) {
  // Peers tell apart sends (and receives) on one communicator, e.g. to the next and the
  // previous pipeline stage.
  const uint64_t pair = (uint64_t{op.key.src} << 32) | op.key.dst;
  return analysis::detect::OpSymbol(static_cast<int>(op.kind),
                                    op.comm_id ^ (pair * 0x9E3779B97F4A7C15ull));
}

void RankReducer::DropOldest() {
  if (!stamped_.empty()) {
    auto it = stamped_.begin();
    it->second.erase(it->second.begin());
    stamped_count_--;
    if (it->second.empty()) stamped_.erase(it);
  } else if (!ops_.empty()) {
    ops_.pop_front();
  }
  stats_.overflow_ops++;
}

void RankReducer::AddOp(const HeldOp& op) {
  if (held_ops() >= options_.max_held_ops) DropOldest();
  max_op_iteration_ = std::max(max_op_iteration_, op.iteration);
  max_op_start_ns_ = std::max(max_op_start_ns_, op.start_ns);
  if (hinted_) {
    if (op.iteration >= 0) {
      stamped_[op.iteration].push_back(op);
      stamped_count_++;
    } else {
      ops_.push_back(op);
    }
    return;
  }
  ops_.push_back(op);
  absl::StatusOr<std::optional<absl::Duration>> closed =
      tracker_.Add(analysis::detect::OpEvent{Symbol(op), op.start_ns});
  if (!closed.ok()) {
    stats_.unordered_ops++;
    return;
  }
  if (closed->has_value()) {
    const int64_t start = op.start_ns - absl::ToInt64Nanoseconds(**closed);
    spans_.emplace_back(start, op.start_ns);
    return;
  }
  if (spans_.empty()) {
    // The next iteration reported starts at most one period back; older ops can go.
    const size_t keep = 4 * static_cast<size_t>(options_.tracker.period.max_lag);
    while (ops_.size() > keep) {
      ops_.pop_front();
      stats_.unassigned_ops++;
    }
  }
}

void RankReducer::AddHint(const v1::IterationHint& hint, int64_t now_ns) {
  if (!hinted_) {
    // Hints from now on. Ops held so far move to their buckets.
    hinted_ = true;
    spans_.clear();
    std::deque<HeldOp> unstamped;
    for (HeldOp& op : ops_) {
      if (op.iteration >= 0) {
        stamped_[op.iteration].push_back(op);
        stamped_count_++;
      } else {
        unstamped.push_back(op);
      }
    }
    ops_.swap(unstamped);
  }
  Hint h;
  h.start_ns = hint.start_ns();
  h.end_ns = hint.end_ns();
  h.plan_version = hint.plan_version();
  h.arrived_ns = now_ns;
  hints_[hint.iteration()] = h;
}

bool RankReducer::HintComplete(int64_t iteration, const Hint& hint, int64_t now_ns) const {
  return max_op_iteration_ > iteration || max_op_start_ns_ >= hint.end_ns ||
         now_ns - hint.arrived_ns >= absl::ToInt64Nanoseconds(options_.hint_hold);
}

void RankReducer::TakeHinted(int64_t now_ns, bool flush_all, std::vector<IterationDraft>* out) {
  for (auto it = hints_.begin(); it != hints_.end();) {
    const int64_t iteration = it->first;
    const Hint& hint = it->second;
    if (!flush_all && !HintComplete(iteration, hint, now_ns)) break;
    // Stamped ops of earlier iterations that were never hinted belong nowhere.
    while (!stamped_.empty() && stamped_.begin()->first < iteration) {
      stats_.unassigned_ops += stamped_.begin()->second.size();
      stamped_count_ -= stamped_.begin()->second.size();
      stamped_.erase(stamped_.begin());
    }
    IterationDraft d;
    if (!stamped_.empty() && stamped_.begin()->first == iteration) {
      d.ops = std::move(stamped_.begin()->second);
      stamped_count_ -= d.ops.size();
      stamped_.erase(stamped_.begin());
    }
    // Unstamped ops go by start time.
    while (!ops_.empty() && ops_.front().start_ns < hint.end_ns) {
      if (ops_.front().start_ns >= hint.start_ns) {
        d.ops.push_back(ops_.front());
      } else {
        stats_.unassigned_ops++;
      }
      ops_.pop_front();
    }
    if (hint.end_ns <= hint.start_ns) {
      stats_.empty_iterations++;
      stats_.unassigned_ops += d.ops.size();
      it = hints_.erase(it);
      continue;
    }
    d.iteration = iteration;
    d.start_ns = hint.start_ns;
    d.end_ns = hint.end_ns;
    d.from_hint = true;
    d.plan_version = hint.plan_version;
    d.completed_at_ns = now_ns;
    out->push_back(std::move(d));
    it = hints_.erase(it);
  }
}

void RankReducer::TakePeriodic(int64_t now_ns, std::vector<IterationDraft>* out) {
  while (!spans_.empty()) {
    const auto [start, end] = spans_.front();
    spans_.pop_front();
    while (!ops_.empty() && ops_.front().start_ns < start) {
      ops_.pop_front();
      stats_.unassigned_ops++;
    }
    if (end <= start) {
      stats_.empty_iterations++;
      continue;
    }
    IterationDraft d;
    d.iteration = next_period_iteration_++;
    d.start_ns = start;
    d.end_ns = end;
    d.from_hint = false;
    d.plan_version = plan_version_;
    d.completed_at_ns = now_ns;
    while (!ops_.empty() && ops_.front().start_ns < end) {
      d.ops.push_back(ops_.front());
      ops_.pop_front();
    }
    out->push_back(std::move(d));
  }
}

void RankReducer::TakeCompleted(int64_t now_ns, bool flush_all, std::vector<IterationDraft>* out) {
  if (hinted_) {
    TakeHinted(now_ns, flush_all, out);
  } else {
    TakePeriodic(now_ns, out);
  }
}

}  // namespace falcon::agent::reduce
