#include "controller/detection/comm_profiler.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/op_kind.h"
#include "common/stats.h"
#include "glog/logging.h"

namespace falcon::controller::detection {
namespace {

// Links with peer-transfer totals per profile: beyond it (a job of over 65,536 links profiled at
// once) new links are not tracked.
constexpr size_t kMaxPeerLinks = 1 << 16;

}  // namespace

void CommProfiler::Start(int64_t first_iteration) {
  active_ = true;
  first_iteration_ = first_iteration;
  pending_.clear();
  judged_ = 0;
  incomplete_ = 0;
  comm_ratios_.clear();
  blames_.clear();
  peer_links_.clear();
  untracked_peer_transfers_ = 0;
}

CommProfiler::PendingIteration& CommProfiler::Pending(int64_t iteration) {
  PendingIteration& p = pending_[iteration];
  while (pending_.size() > max_pending_) pending_.erase(pending_.begin());
  return p;
}

void CommProfiler::AddSummary(const falcon::v1::IterationSummary& s,
                              const registry::JobEntry& job) {
  if (!active_ || s.iteration() < first_iteration_) return;
  if (pending_.size() >= max_pending_ && s.iteration() < pending_.begin()->first) return;
  PendingIteration& p = Pending(s.iteration());
  const falcon::v1::RankInfo* info = job.FindRank(s.rank());
  analysis::detect::RankCompute rc;
  rc.rank = s.rank();
  rc.group = info != nullptr && info->pp_index() >= 0 ? info->pp_index() : 0;
  rc.compute = absl::Nanoseconds(s.compute_ns());
  p.ranks.push_back(rc);
  for (const falcon::v1::CommIterationSummary& c : s.comms()) {
    const registry::CommInfo* comm = job.FindComm(c.comm_id());
    if (comm == nullptr) continue;
    PendingComm& pc = p.comms[c.comm_id()];
    pc.kind = falcon::v1::CommKind_Name(comm->comm.kind());
    pc.bytes = std::max<int64_t>(pc.bytes, static_cast<int64_t>(c.bytes()));
    analysis::detect::CommMember& m = pc.members[s.rank()];
    m.rank = s.rank();
    m.busy = absl::Nanoseconds(c.busy_ns());
    // Keep a device-measured transfer time from raw ops if one is already there.
    if (m.transfer < absl::ZeroDuration()) {
      m.transfer = c.transfer_ns() > 0 || c.wait_ns() > 0 ? absl::Nanoseconds(c.transfer_ns())
                                                          : absl::Nanoseconds(-1);
    }
  }
}

void CommProfiler::AddOps(uint32_t rank,
                          const google::protobuf::RepeatedPtrField<falcon::v1::OpRecord>& ops,
                          const registry::JobEntry& job) {
  if (!active_) return;
  // Sum device time per (iteration, comm) first, then overwrite the members' transfer.
  std::map<std::pair<int64_t, uint64_t>, int64_t> device;
  for (const falcon::v1::OpRecord& op : ops) {
    if (common::IsPeerTransfer(op.op_kind())) {
      AddPeerTransfer(rank, op, job);
      continue;
    }
    if (op.iteration() < first_iteration_ || op.device_duration_ns() <= 0) continue;
    device[{op.iteration(), op.comm_id()}] += op.device_duration_ns();
  }
  for (const auto& [key, ns] : device) {
    if (pending_.size() >= max_pending_ && key.first < pending_.begin()->first) continue;
    PendingIteration& p = Pending(key.first);
    PendingComm& pc = p.comms[key.second];
    int64_t& total = pc.device_ns[rank];  // A rank's ops may come in several batches.
    total += ns;
    analysis::detect::CommMember& m = pc.members[rank];
    m.rank = rank;
    m.transfer = absl::Nanoseconds(total);
    if (m.busy < m.transfer) m.busy = m.transfer;
  }
}

void CommProfiler::CompleteIteration(int64_t iteration, int64_t job_iteration_time_ns,
                                     size_t expected_ranks,
                                     const analysis::detect::BlameOptions& options) {
  if (!active_ || iteration < first_iteration_) return;
  auto it = pending_.find(iteration);
  if (it == pending_.end()) return;
  if (it->second.ranks.size() < expected_ranks) {
    VLOG(1) << "profiled iteration " << iteration << " incomplete: " << it->second.ranks.size()
            << " of " << expected_ranks << " ranks reported";
    ++incomplete_;
    pending_.erase(pending_.begin(), std::next(it));
    return;
  }
  analysis::detect::BlameInput input;
  input.step = iteration;
  input.iteration_time = absl::Nanoseconds(job_iteration_time_ns);
  input.ranks = std::move(it->second.ranks);
  for (auto& [id, pc] : it->second.comms) {
    if (pc.kind.empty() || pc.members.empty()) continue;  // Ops without a summary of the comm.
    analysis::detect::CommTiming t;
    t.comm_id = id;
    t.kind = pc.kind;
    t.bytes = pc.bytes;
    for (auto& [rank, m] : pc.members) t.members.push_back(m);
    input.comms.push_back(std::move(t));
  }
  pending_.erase(pending_.begin(), std::next(it));
  absl::StatusOr<analysis::detect::BlameResult> result =
      analysis::detect::BlameStep(input, options);
  if (!result.ok()) return;  // Inputs are validated; an error here means nothing to judge.
  ++judged_;
  if (VLOG_IS_ON(1)) {
    std::string line = absl::StrCat("profiled iteration ", iteration, " compute_ms=");
    for (const analysis::detect::RankCompute& r : input.ranks) {
      absl::StrAppendFormat(&line, "%d:%.1f,", r.rank, absl::ToDoubleMilliseconds(r.compute));
    }
    for (const analysis::detect::SuspiciousComm& c : result->suspicious) {
      absl::StrAppendFormat(&line, " suspicious=%d:%.2fx:explained_by=%d:material=%d[", c.comm_id,
                            c.ratio, c.explained_by_rank, c.material);
      for (const analysis::detect::CommTiming& t : input.comms) {
        if (t.comm_id != c.comm_id) continue;
        for (const analysis::detect::CommMember& m : t.members) {
          absl::StrAppendFormat(&line, "%d:busy_ms=%.1f:transfer_ms=%.1f,", m.rank,
                                absl::ToDoubleMilliseconds(m.busy),
                                absl::ToDoubleMilliseconds(m.transfer));
        }
      }
      line += "]";
    }
    for (const analysis::detect::Blame& b : result->blamed) {
      absl::StrAppendFormat(&line, " blamed=%d:%s:%.2fx:excess_ms=%.1f", b.rank,
                            analysis::detect::BlameCauseName(b.cause), b.ratio,
                            absl::ToDoubleMilliseconds(b.excess));
    }
    VLOG(1) << line;
  }
  for (const analysis::detect::SuspiciousComm& c : result->suspicious) {
    // A wait that a member's slow compute explains is no evidence against the communicator, nor
    // is an excess too small to explain a slowdown of the job (cross-rank blame).
    if (c.explained_by_rank >= 0 || !c.material) continue;
    comm_ratios_[c.comm_id].push_back(c.ratio);
  }
  for (const analysis::detect::Blame& b : result->blamed) {
    blames_[static_cast<uint32_t>(b.rank)].push_back(b);
  }
}

void CommProfiler::AddPeerTransfer(uint32_t rank, const falcon::v1::OpRecord& op,
                                   const registry::JobEntry& job) {
  const registry::CommInfo* comm = job.FindComm(op.comm_id());
  if (comm == nullptr || op.peer() < 0) return;
  const uint32_t peer = static_cast<uint32_t>(op.peer());
  analysis::detect::PeerLinkKey key;
  key.comm_id = op.comm_id();
  key.src = op.op_kind() == falcon::v1::OP_KIND_PEER_SEND ? rank : peer;
  key.dst = op.op_kind() == falcon::v1::OP_KIND_PEER_SEND ? peer : rank;
  auto it = peer_links_.find(key);
  if (it == peer_links_.end()) {
    if (peer_links_.size() >= kMaxPeerLinks) {
      ++untracked_peer_transfers_;
      return;
    }
    it = peer_links_.emplace(key, analysis::detect::PeerLinkTotals{}).first;
    it->second.group = falcon::v1::CommKind_Name(comm->comm.kind());
  }
  it->second.bytes += op.bytes();
  it->second.busy +=
      absl::Nanoseconds(op.device_duration_ns() > 0 ? op.device_duration_ns()
                                                    : op.host_end_ns() - op.host_start_ns());
  ++it->second.transfers;
}

analysis::detect::PeerLinkRanking CommProfiler::PeerLinks(
    const analysis::detect::PeerLinkOptions& options) const {
  return analysis::detect::RankPeerLinks(peer_links_, options);
}

ProfileResult CommProfiler::Result() const {
  ProfileResult r;
  r.iterations = judged_;
  if (judged_ == 0) return r;
  for (const auto& [id, ratios] : comm_ratios_) {
    double fraction = static_cast<double>(ratios.size()) / judged_;
    if (fraction < 0.5) continue;
    r.suspicious.push_back({id, common::Median(ratios), fraction});
  }
  for (const auto& [rank, list] : blames_) {
    double fraction = static_cast<double>(list.size()) / judged_;
    if (fraction < 0.5) continue;
    // The cause seen most often, with its median ratio.
    int compute = 0;
    for (const analysis::detect::Blame& b : list)
      compute += b.cause == analysis::detect::BlameCause::kCompute;
    analysis::detect::BlameCause cause = 2 * compute >= static_cast<int>(list.size())
                                             ? analysis::detect::BlameCause::kCompute
                                             : analysis::detect::BlameCause::kCommunication;
    std::vector<double> ratios;
    uint64_t comm = 0;
    for (const analysis::detect::Blame& b : list) {
      if (b.cause != cause) continue;
      ratios.push_back(b.ratio);
      comm = b.comm_id;
    }
    r.blamed.push_back({rank, cause, common::Median(ratios), fraction,
                        static_cast<double>(ratios.size()) / judged_, comm});
  }
  return r;
}

}  // namespace falcon::controller::detection
