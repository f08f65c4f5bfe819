#include "agent/reduce/job_reducer.h"

#include <algorithm>
#include <utility>

#include "common/op_kind.h"

namespace falcon::agent::reduce {
namespace {

// IterationSummary.iteration_time_ns is at most an hour (common.proto).
constexpr int64_t kMaxIterationTimeNs = int64_t{3600} * 1000 * 1000 * 1000;

}  // namespace

absl::Status JobReducer::Validate(const Options& options) {
  if (options.match_hold < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("match_hold: must be >= 0");
  }
  if (options.instance_ttl <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("instance_ttl: must be > 0");
  }
  return RankReducer::Validate(options.rank);
}

JobReducer::JobReducer(Options options)
    : options_(options), instances_(absl::ToInt64Nanoseconds(options.instance_ttl)) {}

std::unique_ptr<RankReducer> JobReducer::NewReducer(uint32_t rank) const {
  return std::make_unique<RankReducer>(rank, options_.rank);
}

void JobReducer::AddRank(uint32_t rank) {
  RankState& s = ranks_[rank];
  if (s.reducer == nullptr) s.reducer = NewReducer(rank);
}

void JobReducer::ResetRank(uint32_t rank, bool new_epoch, int64_t now_ns) {
  RankState& s = ranks_[rank];
  int64_t next_iteration = 0;
  if (s.reducer != nullptr) {
    // The old process is gone: whatever it hinted is complete; summarize it at the next Flush.
    std::vector<IterationDraft> drafts;
    s.reducer->TakeCompleted(now_ns, /*flush_all=*/true, &drafts);
    for (IterationDraft& d : drafts) s.pending.push_back(std::move(d));
    retired_unassigned_ += s.reducer->stats().unassigned_ops;
    retired_overflow_ += s.reducer->stats().overflow_ops;
    next_iteration = s.reducer->next_period_iteration();
  }
  s.reducer = NewReducer(rank);
  s.reducer->set_next_period_iteration(next_iteration);
  s.collective_count.clear();
  s.p2p_count.clear();
  if (new_epoch) s.last_emitted = -1;
}

void JobReducer::ContinueAfter(uint32_t rank, int64_t iteration) {
  RankState& s = ranks_[rank];
  if (s.reducer == nullptr) s.reducer = NewReducer(rank);
  s.last_emitted = std::max(s.last_emitted, iteration);
  s.reducer->set_next_period_iteration(std::max(s.reducer->next_period_iteration(), iteration + 1));
}

void JobReducer::AddCommunicator(const v1::Communicator& comm) {
  CommInfo& info = comms_[comm.comm_id()];
  info.kind = comm.kind();
  info.members.assign(comm.member_ranks().begin(), comm.member_ranks().end());
}

void JobReducer::AddOps(uint32_t rank, const google::protobuf::RepeatedPtrField<v1::OpRecord>& ops,
                        int64_t now_ns) {
  auto rit = ranks_.find(rank);
  if (rit == ranks_.end()) return;
  RankState& s = rit->second;
  for (const v1::OpRecord& r : ops) {
    // A peer transfer is the network part of an op already counted; it goes to the controller
    // with the raw ops (profiling) and never into a summary's busy time.
    if (common::IsPeerTransfer(r.op_kind())) continue;
    HeldOp op;
    op.comm_id = r.comm_id();
    op.bytes = r.bytes();
    op.start_ns = r.host_start_ns();
    op.end_ns = r.host_end_ns();
    op.device_ns = r.device_duration_ns();
    op.iteration = r.iteration();
    op.kind = r.op_kind();
    op.key.comm_id = r.comm_id();
    int expected = 0;
    bool all_local = true;
    if (op.kind == v1::OP_KIND_SEND || op.kind == v1::OP_KIND_RECV) {
      const uint32_t peer = static_cast<uint32_t>(r.peer());
      op.key.src = op.kind == v1::OP_KIND_SEND ? rank : peer;
      op.key.dst = op.kind == v1::OP_KIND_SEND ? peer : rank;
      op.key.index = s.p2p_count[std::make_tuple(op.comm_id, op.key.src, op.key.dst)]++;
      expected = 2;
      all_local = (ranks_.count(peer) > 0);
    } else {
      op.key.index = s.collective_count[op.comm_id]++;
      auto cit = comms_.find(op.comm_id);
      if (cit == comms_.end()) {
        all_local = false;
      } else {
        expected = static_cast<int>(cit->second.members.size());
        for (uint32_t m : cit->second.members) all_local = all_local && (ranks_.count(m) > 0);
      }
    }
    if (all_local && expected > 1) {
      op.matched = true;
      instances_.Report(op.key, expected, op.start_ns, now_ns);
    }
    s.reducer->AddOp(op);
  }
}

void JobReducer::AddHint(uint32_t rank, const v1::IterationHint& hint, int64_t now_ns) {
  auto it = ranks_.find(rank);
  if (it != ranks_.end()) it->second.reducer->AddHint(hint, now_ns);
}

void JobReducer::SetPlanVersion(uint32_t rank, int64_t plan_version) {
  auto it = ranks_.find(rank);
  if (it != ranks_.end()) it->second.reducer->set_plan_version(plan_version);
}

bool JobReducer::ReadyToSummarize(const IterationDraft& d) const {
  for (const HeldOp& op : d.ops) {
    if (op.matched && op.device_ns == 0 && !instances_.LatestStart(op.key).has_value()) {
      return false;
    }
  }
  return true;
}

v1::IterationSummary JobReducer::Summarize(uint32_t rank, const IterationDraft& d) {
  v1::IterationSummary out;
  out.set_rank(rank);
  out.set_iteration(d.iteration);
  out.set_start_ns(d.start_ns);
  const int64_t iteration_ns = d.end_ns - d.start_ns;
  out.set_iteration_time_ns(iteration_ns);
  out.set_from_hint(d.from_hint);
  out.set_plan_version(d.plan_version);

  std::map<uint64_t, v1::CommIterationSummary> by_comm;  // Ordered by comm_id.
  std::vector<std::pair<int64_t, int64_t>> intervals;
  intervals.reserve(d.ops.size());
  for (const HeldOp& op : d.ops) {
    const int64_t duration = op.duration_ns();
    int64_t wait = 0;
    if (op.device_ns > 0) {
      wait = duration - op.device_ns;
      stats_.device_ops++;
    } else if (std::optional<int64_t> latest =
                   op.matched ? instances_.LatestStart(op.key) : std::nullopt;
               latest.has_value()) {
      wait = *latest - op.start_ns;
      stats_.matched_ops++;
    } else {
      stats_.unmatched_ops++;
    }
    if (op.matched) instances_.Consume(op.key);
    wait = std::clamp<int64_t>(wait, 0, duration);
    v1::CommIterationSummary& c = by_comm[op.comm_id];
    c.set_comm_id(op.comm_id);
    c.set_op_count(c.op_count() + 1);
    c.set_bytes(c.bytes() + op.bytes);
    c.set_busy_ns(c.busy_ns() + duration);
    c.set_wait_ns(c.wait_ns() + wait);
    c.set_transfer_ns(c.busy_ns() - c.wait_ns());
    const int64_t lo = std::max(op.start_ns, d.start_ns);
    const int64_t hi = std::min(op.end_ns, d.end_ns);
    if (hi > lo) intervals.emplace_back(lo, hi);
  }
  std::sort(intervals.begin(), intervals.end());
  int64_t covered = 0;
  int64_t run_lo = 0;
  int64_t run_hi = -1;
  for (const auto& [lo, hi] : intervals) {
    if (lo > run_hi) {
      if (run_hi > run_lo) covered += run_hi - run_lo;
      run_lo = lo;
      run_hi = hi;
    } else {
      run_hi = std::max(run_hi, hi);
    }
  }
  if (run_hi > run_lo) covered += run_hi - run_lo;
  out.set_compute_ns(std::clamp<int64_t>(iteration_ns - covered, 0, iteration_ns));
  for (auto& [id, c] : by_comm) *out.add_comms() = std::move(c);
  return out;
}

void JobReducer::Flush(int64_t now_ns, bool drain, std::vector<v1::IterationSummary>* out) {
  const int64_t hold_ns = absl::ToInt64Nanoseconds(options_.match_hold);
  std::vector<IterationDraft> drafts;
  for (auto& [rank, s] : ranks_) {
    drafts.clear();
    s.reducer->TakeCompleted(now_ns, drain, &drafts);
    for (IterationDraft& d : drafts) s.pending.push_back(std::move(d));
    while (!s.pending.empty()) {
      const IterationDraft& d = s.pending.front();
      if (!drain && now_ns - d.completed_at_ns < hold_ns && !ReadyToSummarize(d)) break;
      const int64_t iteration_ns = d.end_ns - d.start_ns;
      if (d.iteration <= s.last_emitted || iteration_ns <= 0 ||
          iteration_ns > kMaxIterationTimeNs) {
        stats_.stale_iterations++;
        for (const HeldOp& op : d.ops) {
          if (op.matched) instances_.Consume(op.key);
        }
      } else {
        out->push_back(Summarize(rank, d));
        s.last_emitted = d.iteration;
        stats_.summaries++;
      }
      s.pending.pop_front();
    }
  }
  instances_.Expire(now_ns);
}

JobReducer::Stats JobReducer::stats() const {
  Stats s = stats_;
  s.unassigned_ops = retired_unassigned_;
  s.overflow_ops = retired_overflow_;
  s.held_ops = 0;
  for (const auto& [rank, r] : ranks_) {
    s.unassigned_ops += r.reducer->stats().unassigned_ops;
    s.overflow_ops += r.reducer->stats().overflow_ops;
    s.held_ops += r.reducer->held_ops();
    for (const IterationDraft& d : r.pending) s.held_ops += d.ops.size();
  }
  s.instances = instances_.size();
  return s;
}

const RankReducer* JobReducer::rank_reducer(uint32_t rank) const {
  auto it = ranks_.find(rank);
  return it == ranks_.end() ? nullptr : it->second.reducer.get();
}

}  // namespace falcon::agent::reduce
