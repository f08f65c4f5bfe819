#include "controller/core/directive_issuer.h"

#include <glog/logging.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/directive_kind.h"
#include "controller/metrics/metric_table.h"

namespace falcon::controller::core {

using falcon::v1::DirectiveRecord;

namespace {

// "job=j event=3 directive=12 strategy=s2": the fields every directive log line starts with.
std::string DirectiveFields(const DirectiveRecord& r) {
  return absl::StrCat("job=", r.directive().job(), " event=", r.event_id(),
                      " directive=", r.directive().directive_id(),
                      " strategy=", common::DirectiveKindName(r.directive()));
}

// " rank=1,2" for explicit targets, " rank=all" for every rank of the job.
std::string TargetFields(const falcon::v1::Directive& d) {
  return d.target_ranks_size() == 0 ? " rank=all"
                                    : absl::StrCat(" rank=", absl::StrJoin(d.target_ranks(), ","));
}

}  // namespace

absl::Status DirectiveOptions::Validate() const {
  if (ack_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("directives.ack_timeout: must be > 0");
  }
  if (retry_initial <= absl::ZeroDuration() || retry_max < retry_initial) {
    return absl::InvalidArgumentError(
        "directives.retry_initial: must be > 0 and <= directives.retry_max");
  }
  if (min_lead_iterations < 1 || min_lead_iterations > 1'000'000) {
    return absl::InvalidArgumentError("directives.min_lead_iterations: must be in [1, 1000000]");
  }
  if (delivery_latency < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("directives.delivery_latency: must be >= 0");
  }
  return absl::OkStatus();
}

DirectiveIssuer::DirectiveIssuer(DirectiveOptions options, const common::Clock* clock,
                                 IdAllocator* ids, AgentHub* hub,
                                 metrics::ControllerMetrics* metrics)
    : options_(options), clock_(clock), ids_(ids), hub_(hub), metrics_(metrics) {}

bool DirectiveIssuer::IsPlan(const falcon::v1::Directive& d) {
  return d.has_micro_batch_plan() || d.has_layer_split() || d.has_topology_change() ||
         d.has_checkpoint_restart();
}

bool DirectiveIssuer::BumpsEpoch(const falcon::v1::Directive& d) {
  // A layer split keeps every rank's (dp, pp, tp) place: blocks move between the stages of one
  // pipeline, in step at the effective iteration, as a micro-batch plan changes.
  return d.has_topology_change() || d.has_checkpoint_restart();
}

void DirectiveIssuer::Load(const std::vector<DirectiveRecord>& records) {
  records_.clear();
  retries_.clear();
  acks_.clear();
  issued_epoch_.clear();
  issued_plan_version_.clear();
  const absl::Time now = clock_->Now();
  for (const DirectiveRecord& r : records) {
    records_[r.directive().directive_id()] = r;
    if (IsPlan(r.directive())) {
      int64_t& v = issued_plan_version_[r.directive().job()];
      v = std::max(v, r.directive().plan_version());
    }
    if (BumpsEpoch(r.directive())) {
      uint64_t& e = issued_epoch_[r.directive().job()];
      e = std::max(e, r.directive().epoch());
    }
    // The controller may have stopped before (or right after) sending: re-deliver at once.
    if (r.state() == DirectiveRecord::STATE_PENDING) {
      retries_[r.directive().directive_id()] =
          Retry{now, options_.retry_initial,
                absl::FromUnixNanos(r.issued_time_ns()) + options_.ack_timeout};
      acks_[r.directive().directive_id()] = Index(r);
    }
  }
}

uint64_t DirectiveIssuer::Epoch(const registry::JobEntry& job) const {
  auto it = issued_epoch_.find(job.name());
  return it == issued_epoch_.end() ? job.epoch() : std::max(job.epoch(), it->second);
}

int64_t DirectiveIssuer::EffectiveIteration(const std::string& job) const {
  JobProgress p = progress_ ? progress_(job) : JobProgress{};
  int64_t lead = options_.min_lead_iterations;
  if (p.iteration_time > absl::ZeroDuration()) {
    const double n = std::ceil(absl::FDivDuration(options_.delivery_latency, p.iteration_time));
    lead = std::max<int64_t>(lead, static_cast<int64_t>(std::min(n, 1e6)) + 1);
  }
  return std::max<int64_t>(0, p.max_rank_iteration) + lead;
}

std::vector<uint32_t> DirectiveIssuer::Targets(const falcon::v1::Directive& d,
                                               const registry::JobEntry& job) {
  if (d.target_ranks_size() == 0) return job.ranks();
  return std::vector<uint32_t>(d.target_ranks().begin(), d.target_ranks().end());
}

void DirectiveIssuer::CountError(absl::string_view where) const {
  if (metrics_ != nullptr) metrics_->CountError(where);
}

uint64_t DirectiveIssuer::Issue(falcon::v1::Directive directive, uint64_t event_id,
                                const registry::JobEntry& job, UnitOfWork* uow,
                                const falcon::v1::Directive* rollback) {
  const uint64_t id = ids_->NextDirectiveId(&uow->txn());
  uint64_t epoch = Epoch(job);
  if (BumpsEpoch(directive)) {
    ++epoch;
    issued_epoch_[job.name()] = epoch;
  }
  directive.set_directive_id(id);
  directive.set_job(job.name());
  directive.set_epoch(epoch);
  if (IsPlan(directive)) {
    directive.set_effective_iteration(
        std::max(directive.effective_iteration(), EffectiveIteration(job.name())));
    // Plan versions rise per job in issue order: plans issued before the job applied the last
    // one (S2 and S2L in one step, the reverts on clear) would otherwise share a version, and a
    // shim that acts only on newer plans (the PyTorch package) would skip the later one.
    int64_t& last = issued_plan_version_[job.name()];
    const int64_t version =
        std::max({directive.plan_version(), last + 1, job.job().plan_version() + 1});
    directive.set_plan_version(version);
    last = version;
  }
  const absl::Time now = clock_->Now();
  DirectiveRecord& record = records_[id];
  *record.mutable_directive() = directive;
  record.set_issued_time_ns(absl::ToUnixNanos(now));
  record.set_state(DirectiveRecord::STATE_PENDING);
  record.set_event_id(event_id);
  record.set_deliveries(1);
  record.set_last_delivery_time_ns(absl::ToUnixNanos(now));
  if (rollback != nullptr) *record.mutable_rollback() = *rollback;
  acks_[id] = Index(record);
  uow->txn().PutDirective(record);
  retries_[id] =
      Retry{now + options_.retry_initial, options_.retry_initial, now + options_.ack_timeout};
  // Copy what the send needs: the job entry may change before the commit runs the action.
  registry::JobEntry snapshot = job;
  std::string line =
      absl::StrCat("directive issued ", DirectiveFields(record), TargetFields(directive),
                   " epoch=", epoch, " effective_iteration=", directive.effective_iteration());
  if (directive.reverts_directive_id() != 0) {
    absl::StrAppend(&line, " reverts=", directive.reverts_directive_id());
  }
  absl::StrAppend(&line, " reason=\"", directive.reason(), "\"");
  uow->AfterCommit([this, directive, snapshot, line]() {
    LOG(INFO) << line;
    if (metrics_ != nullptr) metrics_->DirectiveIssued(directive);
    SendTo(directive, snapshot, "");
  });
  return id;
}

void DirectiveIssuer::AckIndex::Count(uint32_t rank, falcon::v1::AckStatus status, int delta) {
  if (status == falcon::v1::ACK_STATUS_APPLIED) {
    applied += delta;
    if (!all_ranks && targets.contains(rank)) applied_targets += delta;
  } else if (status == falcon::v1::ACK_STATUS_REJECTED) {
    rejected += delta;
  }
}

DirectiveIssuer::AckIndex DirectiveIssuer::Index(const DirectiveRecord& record) {
  AckIndex index;
  const falcon::v1::Directive& d = record.directive();
  index.all_ranks = d.target_ranks_size() == 0;
  index.targets.insert(d.target_ranks().begin(), d.target_ranks().end());
  index.position.reserve(record.acks_size());
  for (int i = 0; i < record.acks_size(); ++i) {
    const falcon::v1::DirectiveAck& a = record.acks(i);
    if (!index.position.emplace(a.rank(), i).second) index.duplicates = true;
    index.Count(a.rank(), a.status(), +1);
  }
  return index;
}

DirectiveIssuer::AckIndex& DirectiveIssuer::IndexOf(const DirectiveRecord& record) {
  const uint64_t id = record.directive().directive_id();
  auto it = acks_.find(id);
  if (it == acks_.end()) it = acks_.emplace(id, Index(record)).first;
  return it->second;
}

void DirectiveIssuer::SendTo(const falcon::v1::Directive& d, const registry::JobEntry& job,
                             const std::string& only_agent, const std::set<uint32_t>& only_ranks) {
  std::set<std::string> agents;
  for (uint32_t r : Targets(d, job)) {
    if (!only_ranks.empty() && only_ranks.count(r) == 0) continue;
    if (const std::string* a = job.AgentOfRank(r)) agents.insert(*a);
  }
  falcon::v1::ControllerMessage msg;
  *msg.mutable_directive() = d;
  for (const std::string& a : agents) {
    if (only_agent.empty() || a == only_agent) hub_->Send(a, msg);
  }
}

void DirectiveIssuer::UpdateState(DirectiveRecord& record, const AckIndex& index,
                                  const registry::JobEntry& job, UnitOfWork* uow, AckOutcome* out) {
  if (record.state() != DirectiveRecord::STATE_PENDING) return;
  const falcon::v1::DirectiveAck* rejected = nullptr;
  std::set<uint32_t> applied;  // Filled by the scan below, else counted by the index.
  bool all = false;
  const bool scan = index.rejected > 0 || index.duplicates;
  if (scan) {
    // Once per directive when one rejected it (it becomes REJECTED): the first rejecting ack and
    // every applied rank. Also when a rank has two acks (never while PENDING in practice).
    for (const falcon::v1::DirectiveAck& a : record.acks()) {
      if (a.status() == falcon::v1::ACK_STATUS_REJECTED && rejected == nullptr) rejected = &a;
      if (a.status() == falcon::v1::ACK_STATUS_APPLIED) applied.insert(a.rank());
    }
    all = true;
    for (uint32_t r : Targets(record.directive(), job)) all = all && applied.count(r) > 0;
  } else if (!index.all_ranks) {
    all = index.applied_targets == static_cast<int64_t>(index.targets.size());
  } else if (index.applied >= static_cast<int64_t>(job.ranks().size())) {
    // Every rank of the job (as registered now) applied it: checked rank by rank only once as
    // many ranks applied it as the job has.
    all = true;
    for (uint32_t r : job.ranks()) {
      auto p = index.position.find(r);
      if (p == index.position.end() ||
          record.acks(p->second).status() != falcon::v1::ACK_STATUS_APPLIED) {
        all = false;
        break;
      }
    }
  }
  const uint64_t id = record.directive().directive_id();
  if (rejected != nullptr) {
    record.set_state(DirectiveRecord::STATE_REJECTED);
    record.set_state_reason(
        absl::StrCat("rank ", rejected->rank(), " rejected it: ", rejected->reason()));
    retries_.erase(id);
    out->state_changed = true;
    {
      const std::string line =
          absl::StrCat("directive rejected ", DirectiveFields(record), " rank=", rejected->rank(),
                       " reason=\"", rejected->reason(), "\"");
      uow->AfterCommit([this, line]() {
        LOG(WARNING) << line;
        CountError(metrics::where::kDirectiveRejected);
      });
    }
    if (!applied.empty() && record.has_rollback()) {
      falcon::v1::Directive undo = record.rollback();
      undo.clear_target_ranks();
      for (uint32_t r : applied) undo.add_target_ranks(r);
      undo.set_reverts_directive_id(id);
      undo.set_reason(absl::StrCat("rollback of directive ", id, " (", record.state_reason(),
                                   ") on the ", applied.size(), " ranks that applied it"));
      // Copy what the record needs: Issue inserts into records_ and may move it.
      const uint64_t event_id = record.event_id();
      const uint64_t undo_id = Issue(std::move(undo), event_id, job, uow);
      DirectiveRecord& again = records_[id];
      again.set_rollback_directive_id(undo_id);
      const std::string line =
          absl::StrCat("directive rolled back ", DirectiveFields(again),
                       " rank=", absl::StrJoin(applied, ","), " rollback_directive=", undo_id);
      uow->AfterCommit([line]() { LOG(INFO) << line; });
      out->rollback_id = undo_id;
      out->record = &again;
      return;
    }
  } else if (all) {
    record.set_state(DirectiveRecord::STATE_APPLIED);
    retries_.erase(id);
    out->state_changed = true;
    const std::string line =
        absl::StrCat("directive acked ", DirectiveFields(record), TargetFields(record.directive()),
                     " applied=", scan ? static_cast<int64_t>(applied.size()) : index.applied,
                     " deliveries=", record.deliveries());
    uow->AfterCommit([line]() { LOG(INFO) << line; });
  }
}

DirectiveIssuer::AckOutcome DirectiveIssuer::OnAck(const falcon::v1::DirectiveAck& ack,
                                                   const registry::JobEntry& job, UnitOfWork* uow) {
  AckOutcome out;
  auto it = records_.find(ack.directive_id());
  if (it == records_.end() || it->second.directive().job() != ack.job()) {
    out.error =
        absl::StrCat("directive ", ack.directive_id(), " of job '", ack.job(), "' is unknown");
    LOG(WARNING) << "directive ack refused job=" << ack.job() << " directive=" << ack.directive_id()
                 << " rank=" << ack.rank() << " error=\"" << out.error << "\"";
    CountError(metrics::where::kDirectiveAckRefused);
    return out;
  }
  DirectiveRecord& record = it->second;
  const uint64_t fence = Epoch(job);
  if (ack.epoch() != record.directive().epoch()) {
    out.error = absl::StrCat("ack epoch ", ack.epoch(), " is not directive ", ack.directive_id(),
                             "'s epoch ", record.directive().epoch());
    LOG(WARNING) << "directive ack refused " << DirectiveFields(record) << " rank=" << ack.rank()
                 << " error=\"" << out.error << "\"";
    CountError(metrics::where::kDirectiveAckRefused);
    return out;
  }
  out.record = &record;
  if (ack.epoch() < fence) {
    out.error = absl::StrCat("ack epoch ", ack.epoch(), " is older than job '", job.name(),
                             "' epoch ", fence);
    LOG(WARNING) << "directive ack refused " << DirectiveFields(record) << " rank=" << ack.rank()
                 << " error=\"" << out.error << "\"";
    CountError(metrics::where::kDirectiveAckRefused);
    if (record.state() == DirectiveRecord::STATE_PENDING) {
      *record.add_acks() = ack;  // Kept for the record; it does not count.
      AckIndex& index = IndexOf(record);
      if (!index.position.emplace(ack.rank(), record.acks_size() - 1).second) {
        index.duplicates = true;
      }
      index.Count(ack.rank(), ack.status(), +1);
      record.set_state(DirectiveRecord::STATE_REJECTED);
      record.set_state_reason(absl::StrCat("superseded: directive epoch ", ack.epoch(),
                                           " is older than job epoch ", fence));
      retries_.erase(ack.directive_id());
      out.state_changed = true;
      uow->txn().PutDirectiveAck(record.directive().job(), ack.directive_id(),
                                 static_cast<uint32_t>(record.acks_size() - 1), ack);
      uow->txn().PutDirective(record);
      const std::string line =
          absl::StrCat("directive rejected ", DirectiveFields(record), " rank=", ack.rank(),
                       " reason=\"", record.state_reason(), "\"");
      uow->AfterCommit([this, line]() {
        LOG(WARNING) << line;
        CountError(metrics::where::kDirectiveRejected);
      });
    }
    return out;
  }
  AckIndex& index = IndexOf(record);
  // A final answer is never replaced by a RECEIVED that a re-delivery produced late.
  const auto replaces = [&ack](const falcon::v1::DirectiveAck& before) {
    const bool final_before = before.status() == falcon::v1::ACK_STATUS_APPLIED ||
                              before.status() == falcon::v1::ACK_STATUS_REJECTED;
    return !(final_before && ack.status() == falcon::v1::ACK_STATUS_RECEIVED);
  };
  std::vector<int> changed;  // Positions in record.acks that this ack wrote.
  if (index.duplicates) {
    // Rare (a refused ack kept beside an earlier one): replace every ack of the rank.
    bool replaced = false;
    for (int i = 0; i < record.acks_size(); ++i) {
      falcon::v1::DirectiveAck& a = *record.mutable_acks(i);
      if (a.rank() == ack.rank()) {
        if (replaces(a)) {
          a = ack;
          changed.push_back(i);
        }
        replaced = true;
      }
    }
    if (!replaced) {
      changed.push_back(record.acks_size());
      *record.add_acks() = ack;
    }
    index = Index(record);
  } else if (auto p = index.position.find(ack.rank()); p != index.position.end()) {
    falcon::v1::DirectiveAck& a = *record.mutable_acks(p->second);
    if (replaces(a)) {
      index.Count(a.rank(), a.status(), -1);
      a = ack;
      index.Count(a.rank(), a.status(), +1);
      changed.push_back(p->second);
    }
  } else {
    index.position.emplace(ack.rank(), record.acks_size());
    changed.push_back(record.acks_size());
    *record.add_acks() = ack;
    index.Count(ack.rank(), ack.status(), +1);
  }
  VLOG(1) << "directive ack " << DirectiveFields(record) << " rank=" << ack.rank()
          << " status=" << falcon::v1::AckStatus_Name(ack.status());
  UpdateState(record, index, job, uow, &out);
  DirectiveRecord& stored = records_[ack.directive_id()];
  out.record = &stored;
  // O(1): the ack's own row, and the record's row (without its acks) only when its state changed.
  for (int position : changed) {
    uow->txn().PutDirectiveAck(stored.directive().job(), ack.directive_id(),
                               static_cast<uint32_t>(position), stored.acks(position));
  }
  if (out.state_changed) uow->txn().PutDirective(stored);
  return out;
}

std::vector<uint64_t> DirectiveIssuer::Tick(
    absl::Time now, UnitOfWork* uow,
    const std::function<const registry::JobEntry*(const std::string&)>& jobs,
    const std::function<bool(const std::string&)>& held) {
  std::vector<uint64_t> timed_out;
  for (auto& [id, record] : records_) {
    if (record.state() != DirectiveRecord::STATE_PENDING) continue;
    auto r = retries_.find(id);
    absl::Time deadline = absl::FromUnixNanos(record.issued_time_ns()) + options_.ack_timeout;
    if (r != retries_.end()) {
      // Held: the whole budget is left once the job's agents are back.
      if (held && held(record.directive().job())) {
        r->second.deadline = std::max(r->second.deadline, now + options_.ack_timeout);
      }
      deadline = r->second.deadline;
    }
    if (now >= deadline) {
      record.set_state(DirectiveRecord::STATE_TIMED_OUT);
      std::string missing;
      std::set<uint32_t> answered;
      for (const auto& a : record.acks()) {
        if (a.status() == falcon::v1::ACK_STATUS_APPLIED) answered.insert(a.rank());
      }
      int n = 0;
      for (uint32_t r : record.directive().target_ranks()) {
        if (!answered.count(r) && n++ < 8) absl::StrAppend(&missing, missing.empty() ? "" : ",", r);
      }
      record.set_state_reason(absl::StrCat(
          "not applied by every target within ", absl::FormatDuration(options_.ack_timeout),
          " after ", record.deliveries(), " deliveries",
          missing.empty() ? "" : absl::StrCat(" (missing ranks ", missing, ")")));
      uow->txn().PutDirective(record);
      retries_.erase(id);
      timed_out.push_back(id);
      const std::string line = absl::StrCat("directive timed out ", DirectiveFields(record),
                                            " reason=\"", record.state_reason(), "\"");
      uow->AfterCommit([this, line]() {
        LOG(WARNING) << line;
        CountError(metrics::where::kDirectiveTimedOut);
      });
      continue;
    }
    if (r == retries_.end() || now < r->second.due || !jobs) continue;
    const registry::JobEntry* job = jobs(record.directive().job());
    if (job == nullptr) continue;
    // Re-deliver to the targets without a final answer (RECEIVED ones too: cheap and harmless).
    std::set<uint32_t> final_ranks;
    for (const auto& a : record.acks()) {
      if (a.status() == falcon::v1::ACK_STATUS_APPLIED ||
          a.status() == falcon::v1::ACK_STATUS_REJECTED) {
        final_ranks.insert(a.rank());
      }
    }
    std::set<uint32_t> open;
    for (uint32_t t : Targets(record.directive(), *job)) {
      if (!final_ranks.count(t)) open.insert(t);
    }
    record.set_deliveries(record.deliveries() + 1);
    record.set_last_delivery_time_ns(absl::ToUnixNanos(now));
    uow->txn().PutDirective(record);
    r->second.backoff = std::min(options_.retry_max, r->second.backoff * 2);
    r->second.due = now + r->second.backoff;
    registry::JobEntry snapshot = *job;
    falcon::v1::Directive d = record.directive();
    VLOG(1) << "directive redelivered " << DirectiveFields(record)
            << " rank=" << absl::StrJoin(open, ",") << " deliveries=" << record.deliveries();
    uow->AfterCommit([this, d, snapshot, open]() { SendTo(d, snapshot, "", open); });
  }
  return timed_out;
}

void DirectiveIssuer::Redeliver(const std::string& agent_id, const registry::JobEntry& job) {
  for (const auto& [id, record] : records_) {
    if (record.state() == DirectiveRecord::STATE_PENDING &&
        record.directive().job() == job.name()) {
      VLOG(1) << "directive redelivered " << DirectiveFields(record) << " agent=" << agent_id;
      SendTo(record.directive(), job, agent_id);
    }
  }
}

const DirectiveRecord* DirectiveIssuer::Find(uint64_t directive_id) const {
  auto it = records_.find(directive_id);
  return it == records_.end() ? nullptr : &it->second;
}

std::vector<const DirectiveRecord*> DirectiveIssuer::ListBefore(const std::string& job,
                                                                uint64_t before_id,
                                                                size_t max) const {
  std::vector<const DirectiveRecord*> out;
  auto it = before_id == 0 ? records_.end() : records_.lower_bound(before_id);
  while (it != records_.begin() && out.size() < max) {
    --it;
    if (!job.empty() && it->second.directive().job() != job) continue;
    out.push_back(&it->second);
  }
  return out;
}

std::vector<uint64_t> DirectiveIssuer::Expired(
    absl::Time cutoff, size_t max, const std::function<bool(const DirectiveRecord&)>& keep) const {
  std::vector<uint64_t> out;
  const int64_t cutoff_ns = absl::ToUnixNanos(cutoff);
  for (const auto& [id, r] : records_) {
    if (out.size() >= max) break;
    if (r.state() == DirectiveRecord::STATE_PENDING) continue;
    if (std::max(r.issued_time_ns(), r.last_delivery_time_ns()) > cutoff_ns) continue;
    if (BumpsEpoch(r.directive())) {
      auto fence = issued_epoch_.find(r.directive().job());
      if (fence != issued_epoch_.end() && fence->second == r.directive().epoch()) continue;
    }
    if (keep && keep(r)) continue;
    out.push_back(id);
  }
  return out;
}

std::vector<uint64_t> DirectiveIssuer::DirectivesOfJobs(
    const absl::flat_hash_set<std::string>& jobs) const {
  std::vector<uint64_t> out;
  if (jobs.empty()) return out;
  for (const auto& [id, r] : records_) {
    if (jobs.count(r.directive().job())) out.push_back(id);
  }
  return out;
}

void DirectiveIssuer::Forget(const std::vector<uint64_t>& directive_ids,
                             const absl::flat_hash_set<std::string>& jobs) {
  for (uint64_t id : directive_ids) {
    records_.erase(id);
    retries_.erase(id);
    acks_.erase(id);
  }
  for (const std::string& job : jobs) {
    issued_epoch_.erase(job);
    issued_plan_version_.erase(job);
  }
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

}  // namespace falcon::controller::core
