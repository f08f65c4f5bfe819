#include "controller/core/directive_issuer.h"

#include <algorithm>
#include <set>

namespace falcon::controller {

using falcon::v1::DirectiveRecord;

DirectiveIssuer::DirectiveIssuer(DirectiveOptions options, const Clock* clock, IdAllocator* ids,
                                 AgentHub* hub, ControllerMetrics* metrics)
    : options_(options), clock_(clock), ids_(ids), hub_(hub), metrics_(metrics) {}

void DirectiveIssuer::Load(const std::vector<DirectiveRecord>& records) {
  records_.clear();
  for (const DirectiveRecord& r : records) records_[r.directive().directive_id()] = r;
}

std::vector<uint32_t> DirectiveIssuer::Targets(const falcon::v1::Directive& d,
                                               const JobEntry& job) {
  if (d.target_ranks_size() == 0) return job.ranks();
  return std::vector<uint32_t>(d.target_ranks().begin(), d.target_ranks().end());
}

uint64_t DirectiveIssuer::Issue(falcon::v1::Directive directive, uint64_t event_id,
                                const JobEntry& job, UnitOfWork* uow) {
  const uint64_t id = ids_->NextDirectiveId(&uow->txn());
  directive.set_directive_id(id);
  directive.set_job(job.name());
  directive.set_epoch(job.epoch());
  DirectiveRecord& record = records_[id];
  *record.mutable_directive() = directive;
  record.set_issued_time_ns(absl::ToUnixNanos(clock_->Now()));
  record.set_state(DirectiveRecord::STATE_PENDING);
  record.set_event_id(event_id);
  uow->txn().PutDirective(record);
  // Copy what the send needs: the job entry may change before the commit runs the action.
  JobEntry snapshot = job;
  uow->AfterCommit([this, directive, snapshot]() {
    if (metrics_ != nullptr) metrics_->DirectiveIssued(directive);
    SendTo(directive, snapshot, "");
  });
  return id;
}

void DirectiveIssuer::SendTo(const falcon::v1::Directive& d, const JobEntry& job,
                             const std::string& only_agent) {
  std::set<std::string> agents;
  for (uint32_t r : Targets(d, job)) {
    if (const std::string* a = job.AgentOfRank(r)) agents.insert(*a);
  }
  falcon::v1::ControllerMessage msg;
  *msg.mutable_directive() = d;
  for (const std::string& a : agents) {
    if (only_agent.empty() || a == only_agent) hub_->Send(a, msg);
  }
}

DirectiveIssuer::AckOutcome DirectiveIssuer::OnAck(const falcon::v1::DirectiveAck& ack,
                                                   const JobEntry& job, UnitOfWork* uow) {
  AckOutcome out;
  auto it = records_.find(ack.directive_id());
  if (it == records_.end() || it->second.directive().job() != ack.job()) return out;
  DirectiveRecord& record = it->second;
  out.record = &record;
  bool replaced = false;
  for (falcon::v1::DirectiveAck& a : *record.mutable_acks()) {
    if (a.rank() == ack.rank()) {
      a = ack;
      replaced = true;
    }
  }
  if (!replaced) *record.add_acks() = ack;
  if (record.state() == DirectiveRecord::STATE_PENDING) {
    bool rejected = false;
    std::set<uint32_t> applied;
    for (const falcon::v1::DirectiveAck& a : record.acks()) {
      if (a.status() == falcon::v1::ACK_STATUS_REJECTED) rejected = true;
      if (a.status() == falcon::v1::ACK_STATUS_APPLIED) applied.insert(a.rank());
    }
    bool all = true;
    for (uint32_t r : Targets(record.directive(), job)) all = all && applied.count(r) > 0;
    if (rejected) {
      record.set_state(DirectiveRecord::STATE_REJECTED);
      out.state_changed = true;
    } else if (all) {
      record.set_state(DirectiveRecord::STATE_APPLIED);
      out.state_changed = true;
    }
  }
  uow->txn().PutDirective(record);
  return out;
}

std::vector<uint64_t> DirectiveIssuer::Tick(absl::Time now, UnitOfWork* uow) {
  std::vector<uint64_t> timed_out;
  const int64_t cutoff = absl::ToUnixNanos(now - options_.ack_timeout);
  for (auto& [id, record] : records_) {
    if (record.state() != DirectiveRecord::STATE_PENDING || record.issued_time_ns() > cutoff) {
      continue;
    }
    record.set_state(DirectiveRecord::STATE_TIMED_OUT);
    uow->txn().PutDirective(record);
    timed_out.push_back(id);
  }
  return timed_out;
}

void DirectiveIssuer::Redeliver(const std::string& agent_id, const JobEntry& job) {
  for (const auto& [id, record] : records_) {
    if (record.state() == DirectiveRecord::STATE_PENDING &&
        record.directive().job() == job.name()) {
      SendTo(record.directive(), job, agent_id);
    }
  }
}

const DirectiveRecord* DirectiveIssuer::Find(uint64_t directive_id) const {
  auto it = records_.find(directive_id);
  return it == records_.end() ? nullptr : &it->second;
}

std::vector<DirectiveRecord> DirectiveIssuer::List(const std::string& job, uint32_t limit) const {
  std::vector<DirectiveRecord> out;
  for (auto it = records_.rbegin(); it != records_.rend(); ++it) {
    if (!job.empty() && it->second.directive().job() != job) continue;
    out.push_back(it->second);
    if (limit > 0 && out.size() >= limit) break;
  }
  return out;
}

}  // namespace falcon::controller
