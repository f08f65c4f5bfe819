#include "agent/shim_hub.h"

#include <glog/logging.h>

#include <algorithm>
#include <map>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/agent_metrics_table.h"
#include "agent/shim_validation.h"
#include "common/op_kind.h"

namespace falcon::agent {
namespace {

constexpr size_t kMaxRememberedPlans = 1024;

v1::AgentToShim ErrorMessage(const absl::Status& status) {
  v1::AgentToShim out;
  *out.mutable_error() = ToFieldError(status);
  return out;
}

}  // namespace

ShimHub::ShimHub(Options options, const common::Clock& clock, AgentMetrics* metrics,
                 ControllerSink* sink)
    : options_(std::move(options)), clock_(clock), metrics_(metrics), sink_(sink) {}

ShimHub::~ShimHub() {
  absl::MutexLock lock(&mu_);
  while (!jobs_.empty()) RemoveJob(jobs_.begin());
}

uint64_t ShimHub::Open(ShimStream* stream, uint32_t uid) {
  absl::MutexLock lock(&mu_);
  const uint64_t id = next_session_++;
  sessions_[id].stream = stream;
  sessions_[id].uid = uid;
  stats_.sessions_opened++;
  UpdateSessionGauge();
  return id;
}

void ShimHub::OnClosed(uint64_t session) {
  absl::MutexLock lock(&mu_);
  auto it = sessions_.find(session);
  if (it == sessions_.end()) return;
  const Session& s = it->second;
  if (s.hello) {
    LOG(INFO) << "shim session detached job=" << s.job << " rank=" << s.rank
              << " session=" << session << (s.superseded ? " (superseded)" : "");
  }
  if (s.hello && !s.superseded) {
    auto jit = jobs_.find(s.job);
    if (jit != jobs_.end()) {
      auto rit = jit->second->ranks.find(s.rank);
      if (rit != jit->second->ranks.end() && rit->second.session_id == session) {
        rit->second.session_id = 0;
      }
      jit->second->last_active_ns = clock_.MonotonicNanos();
    }
  }
  sessions_.erase(it);
  UpdateSessionGauge();
}

void ShimHub::UpdateSessionGauge() { metrics_->SetShimSessions(sessions_.size()); }

void ShimHub::Error(Session& s, const absl::Status& status) {
  LOG(WARNING) << "shim message refused job=" << (s.hello ? s.job : "?")
               << " rank=" << (s.hello ? absl::StrCat(s.rank) : "?") << " error=\""
               << status.message() << "\"";
  stats_.errors++;
  metrics_->CountShimError();
  metrics_->CountError(metric::where::kShimMessageRefused);
  s.stream->Send(ErrorMessage(status));
}

void ShimHub::OnMessage(uint64_t session, const v1::ShimMessage& msg) {
  absl::MutexLock lock(&mu_);
  auto it = sessions_.find(session);
  if (it == sessions_.end() || it->second.superseded) return;
  Session& s = it->second;
  if (!accepting_ &&
      (msg.msg_case() == v1::ShimMessage::kHello || msg.msg_case() == v1::ShimMessage::kOpBatch ||
       msg.msg_case() == v1::ShimMessage::kIteration)) {
    stats_.refused_draining++;
    if (msg.msg_case() == v1::ShimMessage::kHello) {
      s.stream->Close(absl::UnavailableError("agent draining: attach to the next agent"));
    }
    return;
  }
  if (msg.msg_case() == v1::ShimMessage::kHello) {
    HandleHello(session, s, msg.hello());
    return;
  }
  if (msg.msg_case() == v1::ShimMessage::MSG_NOT_SET) {
    Error(s, absl::InvalidArgumentError("msg: no message set"));
    return;
  }
  if (!s.hello) {
    Error(s,
          absl::InvalidArgumentError("hello: the first message of a stream must be a ShimHello"));
    return;
  }
  auto jit = jobs_.find(s.job);
  if (jit == jobs_.end()) return;
  JobState& job = *jit->second;
  RankState& rank = job.ranks[s.rank];
  switch (msg.msg_case()) {
    case v1::ShimMessage::kCommunicator:
      HandleCommunicator(s, job, msg.communicator());
      break;
    case v1::ShimMessage::kOpBatch:
      HandleOpBatch(s, job, rank, msg.op_batch());
      break;
    case v1::ShimMessage::kIteration: {
      if (msg.iteration().iteration() <= rank.resumed_after) {
        stats_.skipped_delivered_hints++;  // An earlier agent delivered it.
        break;
      }
      if (absl::Status st = ValidateIterationHint(msg.iteration(), rank.last_hint_iteration);
          !st.ok()) {
        Error(s, st);
        break;
      }
      job.reducer.AddHint(s.rank, msg.iteration(), clock_.MonotonicNanos());
      rank.last_hint_iteration = msg.iteration().iteration();
      break;
    }
    case v1::ShimMessage::kDirectiveAck:
      HandleDirectiveAck(s, job, rank, msg.directive_ack());
      break;
    case v1::ShimMessage::kValidationResult: {
      if (absl::Status st = ValidateValidationResult(msg.validation_result(), s.job, s.rank);
          !st.ok()) {
        Error(s, st);
        break;
      }
      v1::AgentMessage out;
      *out.mutable_validation_result() = msg.validation_result();
      sink_->Send(std::move(out));
      break;
    }
    default:
      Error(s, absl::InvalidArgumentError("msg: unknown message kind"));
  }
}

absl::Status ShimHub::SameModel(const JobState& job, const v1::ShimHello& hello) {
  auto differs = [&](absl::string_view field, uint64_t known, uint64_t said) {
    return absl::InvalidArgumentError(
        absl::StrCat("hello.", field, ": rank ", hello.rank().rank(), " of job '", hello.job(),
                     "' says ", said, ", the job's other ranks on this node said ", known,
                     " at epoch ", job.epoch, ": every rank of a job must report the same model"));
  };
  if (hello.pipeline_blocks() != 0 && job.pipeline_blocks != 0 &&
      hello.pipeline_blocks() != job.pipeline_blocks) {
    return differs("pipeline_blocks", job.pipeline_blocks, hello.pipeline_blocks());
  }
  if (hello.block_state_bytes() != 0 && job.block_state_bytes != 0 &&
      hello.block_state_bytes() != job.block_state_bytes) {
    return differs("block_state_bytes", job.block_state_bytes, hello.block_state_bytes());
  }
  return absl::OkStatus();
}

JobState& ShimHub::GetOrCreateJob(const v1::ShimHello& hello) {
  auto& slot = jobs_[hello.job()];
  if (slot == nullptr) {
    slot = std::make_unique<JobState>(hello.job(), options_.reduce);
    slot->world_size = hello.world_size();
    slot->epoch = hello.epoch();
    slot->metrics = metrics_->AddJob(hello.job());
  }
  return *slot;
}

void ShimHub::HandleHello(uint64_t id, Session& s, const v1::ShimHello& hello) {
  if (s.hello) {
    Error(s, absl::InvalidArgumentError("hello: already received on this stream"));
    return;
  }
  if (absl::Status st = ValidateShimHello(hello); !st.ok()) {
    Error(s, st);
    return;
  }
  auto existing = jobs_.find(hello.job());
  if (existing != jobs_.end() && existing->second->owner_uid != s.uid) {
    LOG(WARNING) << "shim attach refused job=" << hello.job() << " rank=" << hello.rank().rank()
                 << " uid=" << s.uid << " owner_uid=" << existing->second->owner_uid
                 << " pid=" << hello.rank().pid() << " session=" << id;
    stats_.owner_refusals++;
    metrics_->CountError(metric::where::kShimJobOwnerRefused);
    s.stream->Close(absl::PermissionDeniedError(
        absl::StrCat("hello.job: job '", hello.job(), "' is held on this node by a shim of uid ",
                     existing->second->owner_uid, ", not uid ", s.uid)));
    return;
  }
  if (existing != jobs_.end() && existing->second->world_size != hello.world_size()) {
    if (hello.epoch() <= existing->second->epoch) {
      Error(s, absl::InvalidArgumentError(absl::StrCat(
                   "hello.world_size: job '", hello.job(), "' has world_size ",
                   existing->second->world_size, " on this node, not ", hello.world_size())));
      return;
    }
    RestartJob(existing->second, hello);
  }
  if (existing != jobs_.end() && hello.epoch() <= existing->second->epoch) {
    if (absl::Status st = SameModel(*existing->second, hello); !st.ok()) {
      Error(s, st);
      return;
    }
  }
  const bool created = existing == jobs_.end();
  const int64_t now = clock_.MonotonicNanos();
  JobState& job = GetOrCreateJob(hello);
  if (created) job.owner_uid = s.uid;
  const uint32_t rank_id = hello.rank().rank();
  const bool new_epoch = hello.epoch() > job.epoch;
  if (new_epoch) {
    job.epoch = hello.epoch();
    job.registration_dirty = true;
  }
  auto set_layout = [&job](uint32_t& field, uint32_t value) {
    if (value != 0 && field != value) {
      field = value;
      job.registration_dirty = true;
    }
  };
  set_layout(job.dp_size, hello.dp_size());
  set_layout(job.pp_size, hello.pp_size());
  set_layout(job.tp_size, hello.tp_size());
  set_layout(job.global_micro_batches, hello.global_micro_batches());
  set_layout(job.pipeline_blocks, hello.pipeline_blocks());
  if (hello.block_state_bytes() != 0 && job.block_state_bytes != hello.block_state_bytes()) {
    job.block_state_bytes = hello.block_state_bytes();
    job.registration_dirty = true;
  }

  auto [rit, inserted] = job.ranks.try_emplace(rank_id);
  RankState& rank = rit->second;
  if (!inserted && rank.session_id != 0 && rank.session_id != id) {
    auto old = sessions_.find(rank.session_id);
    if (old != sessions_.end()) {
      old->second.superseded = true;
      old->second.stream->Close(absl::AbortedError(
          absl::StrCat("superseded by a newer session of job '", hello.job(), "' rank ", rank_id)));
    }
    stats_.superseded++;
  }
  if (!inserted && rank.info.pid() != hello.rank().pid()) DropCommsOf(job, rank_id, hello);
  bool new_session = inserted;
  if (inserted) {
    rank.metrics = metrics_->AddRank(hello.job(), rank_id, hello.rank().gpu());
    job.reducer.AddRank(rank_id);
  } else if (new_epoch || rank.info.pid() != hello.rank().pid()) {
    // A new trainer process: a new rank session with its own sequence numbers.
    job.reducer.ResetRank(rank_id, new_epoch, now);
    rank.acked_batch_seq = 0;
    rank.last_op_seq = 0;
    rank.last_hint_iteration = -1;
    new_session = true;
  }
  if (new_session) {
    rank.generation = next_generation_++;
    rank.undelivered.clear();
    rank.delivered_sequence = 0;
    rank.delivered_iteration = -1;
    rank.delivered_end_ns = -1;
    rank.resumed_after = -1;
    if (hello.has_delivered_iteration() && hello.delivered_iteration() >= 0) {
      // An earlier agent delivered this process's iterations up to here (it died, or this one
      // forgot the job): resent data at or below it is skipped.
      rank.resumed_after = hello.delivered_iteration();
      rank.delivered_iteration = hello.delivered_iteration();
      job.reducer.ContinueAfter(rank_id, hello.delivered_iteration());
    }
  }
  if (inserted || rank.info.SerializeAsString() != hello.rank().SerializeAsString()) {
    rank.info = hello.rank();
    job.registration_dirty = true;
  }
  rank.session_id = id;
  job.last_active_ns = now;
  s.hello = true;
  s.job = hello.job();
  s.rank = rank_id;

  v1::AgentToShim welcome;
  welcome.mutable_welcome()->set_session_id(
      absl::StrCat(options_.node, "/", hello.job(), "/", rank_id, "/", id));
  welcome.mutable_welcome()->set_acked_sequence(rank.acked_batch_seq);
  welcome.mutable_welcome()->set_profiling(job.Profiling(rank_id, now));
  welcome.mutable_welcome()->set_delivery_acks(true);
  if (rank.last_hint_iteration >= 0) {
    welcome.mutable_welcome()->set_hinted_iteration(rank.last_hint_iteration);
  }
  s.stream->Send(welcome);
  LOG(INFO) << "shim session attached job=" << hello.job() << " rank=" << rank_id
            << " session=" << id << " pid=" << hello.rank().pid() << " epoch=" << hello.epoch()
            << " acked_sequence=" << rank.acked_batch_seq
            << " redelivered_directives=" << rank.unacked_directives.size()
            << (rank.resumed_after >= 0 && new_session
                    ? absl::StrCat(" resumed_after_iteration=", rank.resumed_after)
                    : "")
            << (inserted ? "" : " (reattached)");
  // What was delivered while the shim was away (or before it came back).
  if (rank.delivered_sequence > 0 || rank.delivered_iteration >= 0) {
    AdvanceDelivery(job, rank, rank_id, /*always=*/true);
  }
  for (const v1::Directive& d : rank.unacked_directives) {
    v1::AgentToShim out;
    *out.mutable_directive() = d;
    s.stream->Send(out);
  }
  UpdateSessionGauge();
}

void ShimHub::DropCommsOf(JobState& job, uint32_t rank, const v1::ShimHello& hello) {
  size_t dropped = 0;
  for (auto it = job.comm_ranks.begin(); it != job.comm_ranks.end();) {
    it->second.erase(rank);
    if (!it->second.empty()) {
      ++it;
      continue;
    }
    job.comms.erase(it->first);
    it = job.comm_ranks.erase(it);
    ++dropped;
  }
  if (dropped == 0) return;
  stats_.stale_comms += dropped;
  job.registration_dirty = true;
  LOG(INFO) << "communicators of a replaced process dropped job=" << job.name << " rank=" << rank
            << " epoch=" << hello.epoch() << " pid=" << hello.rank().pid()
            << " comms_dropped=" << dropped;
}

void ShimHub::HandleCommunicator(Session& s, JobState& job, const v1::Communicator& comm) {
  if (absl::Status st = ValidateCommunicator(comm, job.world_size, s.rank); !st.ok()) {
    Error(s, st);
    return;
  }
  job.comm_ranks[comm.comm_id()].insert(s.rank);
  auto [it, inserted] = job.comms.try_emplace(comm.comm_id(), comm);
  if (!inserted) {
    if (it->second.SerializeAsString() == comm.SerializeAsString()) return;
    it->second = comm;
  }
  job.reducer.AddCommunicator(comm);
  job.registration_dirty = true;
}

void ShimHub::HandleOpBatch(Session& s, JobState& job, RankState& rank, const v1::OpBatch& batch) {
  v1::AgentToShim ack;
  if (batch.sequence() != 0 && batch.sequence() <= rank.acked_batch_seq) {
    stats_.duplicate_batches++;
    ack.mutable_op_batch_ack()->set_sequence(rank.acked_batch_seq);
    s.stream->Send(ack);
    return;
  }
  OpBatchContext ctx;
  ctx.world_size = job.world_size;
  ctx.self_rank = s.rank;
  ctx.last_op_seq = rank.last_op_seq;
  auto find_comm = [&job](uint64_t id) -> const v1::Communicator* {
    auto it = job.comms.find(id);
    return it == job.comms.end() ? nullptr : &it->second;
  };
  if (absl::Status st = ValidateOpBatch(batch, ctx, find_comm); !st.ok()) {
    Error(s, st);
    return;
  }
  const int64_t now = clock_.MonotonicNanos();
  PendingOpBatch pending;
  pending.sequence = batch.sequence();
  int skip = 0;  // Stamped records an earlier agent delivered (resent after it died).
  for (const v1::OpRecord& r : batch.records()) {
    pending.max_start_ns = std::max(pending.max_start_ns, r.host_start_ns());
    if (r.iteration() >= 0) {
      pending.max_iteration = std::max(pending.max_iteration, r.iteration());
      skip += r.iteration() <= rank.resumed_after;
    } else {
      pending.max_unstamped_start_ns = std::max(pending.max_unstamped_start_ns, r.host_start_ns());
    }
  }
  if (skip == 0) {
    job.reducer.AddOps(s.rank, batch.records(), now);
  } else {
    google::protobuf::RepeatedPtrField<v1::OpRecord> fresh;
    for (const v1::OpRecord& r : batch.records()) {
      if (r.iteration() < 0 || r.iteration() > rank.resumed_after) *fresh.Add() = r;
    }
    stats_.skipped_delivered_ops += skip;
    job.reducer.AddOps(s.rank, fresh, now);
  }
  rank.metrics.records_in->Increment(batch.records_size());
  if (batch.dropped_records() > 0) {
    job.metrics.dropped_shim_ring->Increment(static_cast<double>(batch.dropped_records()));
  }
  uint64_t last_comm = 0;
  prometheus::Histogram* hist = nullptr;
  for (const v1::OpRecord& r : batch.records()) {
    if (common::IsPeerTransfer(r.op_kind())) continue;  // Part of an op already observed.
    if (hist == nullptr || r.comm_id() != last_comm) {
      last_comm = r.comm_id();
      const v1::CommKind kind = job.comms.at(last_comm).kind();
      hist = job.metrics.op_duration[kind < 0 || kind > 5 ? 0 : kind];
    }
    hist->Observe(static_cast<double>(r.host_end_ns() - r.host_start_ns()) * 1e-9);
  }
  if (job.Profiling(s.rank, now)) {
    for (const v1::OpRecord& r : batch.records()) {
      if (rank.raw_ops.size() >= options_.max_raw_ops_per_rank) {
        job.metrics.dropped_profiling->Increment();
        continue;
      }
      rank.raw_ops.push_back(r);
    }
  }
  if (batch.records_size() > 0) rank.last_op_seq = batch.records(batch.records_size() - 1).seq();
  rank.acked_batch_seq = batch.sequence();
  ack.mutable_op_batch_ack()->set_sequence(batch.sequence());
  s.stream->Send(ack);
  if (rank.undelivered.size() >= options_.max_undelivered_batches) {
    // Bounded: the oldest counts as delivered (the shim may drop its copy).
    rank.delivered_sequence = rank.undelivered.front().sequence;
    rank.undelivered.pop_front();
    stats_.undelivered_overflow++;
  }
  rank.undelivered.push_back(pending);
  // It may be delivered already (resent data of delivered iterations, or no records).
  AdvanceDelivery(job, rank, s.rank, /*always=*/false);
}

void ShimHub::AdvanceDelivery(const JobState& job, RankState& rank, uint32_t rank_id, bool always) {
  const reduce::RankReducer* reducer = job.reducer.rank_reducer(rank_id);
  const bool hinted = reducer != nullptr && reducer->hinted();
  auto delivered = [&](const PendingOpBatch& b) {
    if (!hinted) return b.max_start_ns < 0 || b.max_start_ns < rank.delivered_end_ns;
    return (b.max_iteration < 0 || b.max_iteration <= rank.delivered_iteration) &&
           (b.max_unstamped_start_ns < 0 || b.max_unstamped_start_ns < rank.delivered_end_ns);
  };
  bool moved = always;
  while (!rank.undelivered.empty() && delivered(rank.undelivered.front())) {
    rank.delivered_sequence = rank.undelivered.front().sequence;
    rank.undelivered.pop_front();
    moved = true;
  }
  if (!moved) return;
  v1::AgentToShim out;
  out.mutable_delivered()->set_sequence(rank.delivered_sequence);
  out.mutable_delivered()->set_iteration(rank.delivered_iteration);
  if (SendToRank(job, rank_id, out)) stats_.delivery_acks++;
}

void ShimHub::OnSettled(const std::vector<uint64_t>& tags) {
  absl::MutexLock lock(&mu_);
  std::vector<std::pair<JobState*, uint32_t>> touched;
  for (uint64_t tag : tags) {
    auto it = marks_.find(tag);
    if (it == marks_.end()) continue;
    for (const DeliveryMark& m : it->second) {
      auto jit = jobs_.find(m.job);
      if (jit == jobs_.end()) continue;
      auto rit = jit->second->ranks.find(m.rank);
      if (rit == jit->second->ranks.end() || rit->second.generation != m.generation) continue;
      RankState& r = rit->second;
      bool raised = false;
      if (m.iteration > r.delivered_iteration) {
        r.delivered_iteration = m.iteration;
        raised = true;
      }
      if (m.end_ns > r.delivered_end_ns) {
        r.delivered_end_ns = m.end_ns;
        raised = true;
      }
      if (raised) touched.emplace_back(jit->second.get(), m.rank);
    }
    marks_.erase(it);
  }
  std::sort(touched.begin(), touched.end());
  touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
  for (auto& [job, rank] : touched) {
    AdvanceDelivery(*job, job->ranks.at(rank), rank, /*always=*/true);
  }
}

void ShimHub::HandleDirectiveAck(Session& s, JobState& job, RankState& rank,
                                 const v1::DirectiveAck& ack) {
  if (absl::Status st = ValidateDirectiveAck(ack, s.job, s.rank); !st.ok()) {
    Error(s, st);
    return;
  }
  if (ack.status() != v1::ACK_STATUS_RECEIVED) {
    auto& q = rank.unacked_directives;
    q.erase(std::remove_if(
                q.begin(), q.end(),
                [&](const v1::Directive& d) { return d.directive_id() == ack.directive_id(); }),
            q.end());
  }
  if (ack.status() == v1::ACK_STATUS_APPLIED) {
    auto it = job.directive_plan_versions.find(ack.directive_id());
    if (it != job.directive_plan_versions.end() && it->second > 0) {
      job.reducer.SetPlanVersion(s.rank, it->second);
    }
  }
  VLOG(1) << "directive ack from shim job=" << s.job << " rank=" << s.rank
          << " directive=" << ack.directive_id() << " status=" << v1::AckStatus_Name(ack.status());
  v1::AgentMessage out;
  *out.mutable_directive_ack() = ack;
  sink_->Send(std::move(out));
}

bool ShimHub::SendToRank(const JobState& job, uint32_t rank, const v1::AgentToShim& msg) {
  auto rit = job.ranks.find(rank);
  if (rit == job.ranks.end() || rit->second.session_id == 0) return false;
  auto sit = sessions_.find(rit->second.session_id);
  if (sit == sessions_.end()) return false;
  sit->second.stream->Send(msg);
  return true;
}

void ShimHub::OnDirective(const v1::Directive& directive) {
  absl::MutexLock lock(&mu_);
  auto jit = jobs_.find(directive.job());
  if (jit == jobs_.end() || directive.directive_id() == 0) {
    LOG(WARNING) << "directive ignored job=" << directive.job()
                 << " directive=" << directive.directive_id() << " (no rank of the job here)";
    stats_.ignored_controller_messages++;
    metrics_->CountError(metric::where::kDirectiveIgnored);
    return;
  }
  JobState& job = *jit->second;
  std::vector<uint32_t> targets;
  if (directive.target_ranks().empty()) {
    for (const auto& [rank, r] : job.ranks) targets.push_back(rank);
  } else {
    for (uint32_t rank : directive.target_ranks()) {
      if (job.ranks.count(rank) > 0) targets.push_back(rank);
    }
  }
  if (targets.empty()) {
    LOG(WARNING) << "directive ignored job=" << directive.job()
                 << " directive=" << directive.directive_id() << " (no target rank here)";
    stats_.ignored_controller_messages++;
    metrics_->CountError(metric::where::kDirectiveIgnored);
    return;
  }
  if (job.directive_plan_versions.try_emplace(directive.directive_id(), directive.plan_version())
          .second) {
    job.directive_order.push_back(directive.directive_id());
    if (job.directive_order.size() > kMaxRememberedPlans) {
      job.directive_plan_versions.erase(job.directive_order.front());
      job.directive_order.pop_front();
    }
  }
  if (directive.has_profiling()) {
    ApplyProfiling(job, directive.profiling(), clock_.MonotonicNanos());
  }
  v1::AgentToShim out;
  *out.mutable_directive() = directive;
  std::vector<uint32_t> delivered;
  std::vector<uint32_t> queued;  // No live session now: sent when the rank's shim attaches.
  for (uint32_t rank : targets) {
    auto& q = job.ranks[rank].unacked_directives;
    q.erase(std::remove_if(q.begin(), q.end(),
                           [&](const v1::Directive& d) {
                             return d.directive_id() == directive.directive_id();
                           }),
            q.end());
    q.push_back(directive);
    while (q.size() > options_.max_unacked_directives) q.pop_front();
    delivered.push_back(rank);
    if (!SendToRank(job, rank, out)) queued.push_back(rank);
  }
  LOG(INFO) << "directive delivered to shim job=" << directive.job()
            << " directive=" << directive.directive_id()
            << " rank=" << absl::StrJoin(delivered, ",")
            << (queued.empty() ? ""
                               : absl::StrCat(" queued_for_reattach=", absl::StrJoin(queued, ",")));
  metrics_->CountDirectiveRelayed();
}

void ShimHub::OnValidationTask(const v1::ValidationTask& task) {
  absl::MutexLock lock(&mu_);
  auto jit = jobs_.find(task.job());
  if (jit == jobs_.end()) {
    stats_.ignored_controller_messages++;
    return;
  }
  JobState& job = *jit->second;
  v1::AgentToShim out;
  *out.mutable_validation_task() = task;
  bool relayed = false;
  for (uint32_t rank : task.ranks()) {
    if (job.ranks.count(rank) == 0) continue;  // Another node's rank.
    if (SendToRank(job, rank, out)) {
      relayed = true;
      continue;
    }
    v1::AgentMessage result;
    v1::ValidationResult* r = result.mutable_validation_result();
    r->set_task_id(task.task_id());
    r->set_job(task.job());
    r->set_rank(rank);
    r->set_error(absl::StrCat("rank ", rank, " has no live shim session on node ", options_.node));
    LOG(WARNING) << "validation task not delivered job=" << task.job() << " task=" << task.task_id()
                 << " rank=" << rank << " (no live shim session; answered with an error)";
    metrics_->CountError(metric::where::kValidationTaskUndelivered);
    sink_->Send(std::move(result));
  }
  if (relayed) {
    VLOG(1) << "validation task delivered to shims job=" << task.job()
            << " task=" << task.task_id();
    metrics_->CountValidationTaskRelayed();
  }
}

void ShimHub::ApplyProfiling(JobState& job, const v1::ProfilingControl& control, int64_t now_ns) {
  ProfilingWindow window;
  window.enabled = control.enabled();
  window.until_ns = control.max_duration_ns() > 0 ? now_ns + control.max_duration_ns() : 0;
  if (control.ranks().empty()) {
    job.profile_all = window;
    if (!control.enabled()) {
      for (auto& [rank, r] : job.ranks) r.profiling = window;
    }
    return;
  }
  for (uint32_t rank : control.ranks()) {
    auto it = job.ranks.find(rank);
    if (it != job.ranks.end()) it->second.profiling = window;
  }
}

void ShimHub::OnProfiling(const v1::ProfilingControl& control) {
  absl::MutexLock lock(&mu_);
  auto jit = jobs_.find(control.job());
  if (jit == jobs_.end()) {
    stats_.ignored_controller_messages++;
    return;
  }
  JobState& job = *jit->second;
  ApplyProfiling(job, control, clock_.MonotonicNanos());
  v1::AgentToShim out;
  *out.mutable_profiling() = control;
  if (control.ranks().empty()) {
    for (const auto& [rank, r] : job.ranks) SendToRank(job, rank, out);
  } else {
    for (uint32_t rank : control.ranks()) SendToRank(job, rank, out);
  }
}

void ShimHub::FlushJob(JobState& job, bool drain, int64_t now_ns,
                       std::vector<v1::TelemetryBatch>* out, std::vector<uint64_t>* delivery_tags) {
  std::vector<v1::IterationSummary> summaries;
  job.reducer.Flush(now_ns, drain, &summaries);
  // Iteration-major order (each rank's iterations stay increasing): a consumer that assembles
  // job iterations from all ranks completes each one without holding many partial ones.
  std::stable_sort(summaries.begin(), summaries.end(),
                   [](const v1::IterationSummary& a, const v1::IterationSummary& b) {
                     return a.iteration() < b.iteration();
                   });
  for (const v1::IterationSummary& s : summaries) {
    auto rit = job.ranks.find(s.rank());
    if (rit == job.ranks.end()) continue;
    rit->second.metrics.iteration_time_seconds->Set(static_cast<double>(s.iteration_time_ns()) *
                                                    1e-9);
    rit->second.metrics.compute_time_seconds->Set(static_cast<double>(s.compute_ns()) * 1e-9);
    rit->second.metrics.iterations->Increment();
  }
  const reduce::JobReducer::Stats rs = job.reducer.stats();
  if (rs.unassigned_ops > job.dropped_unassigned_reported) {
    job.metrics.dropped_unassigned->Increment(
        static_cast<double>(rs.unassigned_ops - job.dropped_unassigned_reported));
    job.dropped_unassigned_reported = rs.unassigned_ops;
  }
  if (rs.overflow_ops > job.dropped_overflow_reported) {
    job.metrics.dropped_overflow->Increment(
        static_cast<double>(rs.overflow_ops - job.dropped_overflow_reported));
    job.dropped_overflow_reported = rs.overflow_ops;
  }

  size_t next = 0;
  while (next < summaries.size() || job.registration_dirty) {
    v1::TelemetryBatch batch;
    batch.set_job(job.name);
    if (job.registration_dirty) {
      *batch.mutable_registration() = job.Registration();
      job.registration_dirty = false;
    }
    const size_t end =
        std::min(summaries.size(), next + static_cast<size_t>(options_.max_summaries_per_batch));
    for (; next < end; ++next) *batch.add_iterations() = std::move(summaries[next]);
    job.metrics.summaries_out->Increment(batch.iterations_size());
    if (delivery_tags != nullptr) {
      // Per rank, the highest iteration (summaries are ordered by iteration).
      std::map<uint32_t, DeliveryMark> by_rank;
      for (const v1::IterationSummary& sum : batch.iterations()) {
        auto rit = job.ranks.find(sum.rank());
        if (rit == job.ranks.end()) continue;
        DeliveryMark& m = by_rank[sum.rank()];
        m.job = job.name;
        m.rank = sum.rank();
        m.generation = rit->second.generation;
        m.iteration = sum.iteration();
        m.end_ns = sum.start_ns() + sum.iteration_time_ns();
      }
      uint64_t tag = 0;
      if (!by_rank.empty()) {
        tag = next_tag_++;
        std::vector<DeliveryMark>& marks = marks_[tag];
        for (auto& [rank, m] : by_rank) marks.push_back(std::move(m));
      }
      delivery_tags->push_back(tag);
    }
    out->push_back(std::move(batch));
  }
  // Raw ops of every rank of the node in as few batches as max_ops_per_batch allows (one
  // RankOps per rank in each): one message per node, not per rank, while the job is profiled.
  const size_t max_ops = static_cast<size_t>(options_.max_ops_per_batch);
  size_t open = out->size();  // Index of the batch being filled; out->size(): none.
  size_t in_open = 0;
  for (auto& [rank, r] : job.ranks) {
    for (size_t i = 0; i < r.raw_ops.size();) {
      if (open == out->size() || in_open == max_ops) {
        open = out->size();
        in_open = 0;
        out->emplace_back();
        out->back().set_job(job.name);
        if (delivery_tags != nullptr) delivery_tags->push_back(0);
      }
      v1::RankOps* ro = (*out)[open].add_rank_ops();
      ro->set_rank(rank);
      const size_t end = std::min(r.raw_ops.size(), i + (max_ops - in_open));
      for (; i < end; ++i) *ro->add_ops() = std::move(r.raw_ops[i]);
      in_open += static_cast<size_t>(ro->ops_size());
      job.metrics.ops_out->Increment(ro->ops_size());
    }
    r.raw_ops.clear();
  }
}

void ShimHub::RestartJob(std::unique_ptr<JobState>& slot, const v1::ShimHello& hello) {
  JobState& old = *slot;
  // What the old ranks reported goes to the controller first (their epoch's registration is
  // stale: not resent).
  old.registration_dirty = false;
  const size_t carried = carried_.size();
  FlushJob(old, /*drain=*/true, clock_.MonotonicNanos(), &carried_, &carried_tags_);
  int closed = 0;
  for (auto& [rank_id, rank] : old.ranks) {
    if (auto it = sessions_.find(rank.session_id); rank.session_id != 0 && it != sessions_.end()) {
      it->second.superseded = true;
      it->second.stream->Close(
          absl::AbortedError(absl::StrCat("superseded: job '", old.name, "' restarted at epoch ",
                                          hello.epoch(), " with world_size ", hello.world_size())));
      ++closed;
    }
    metrics_->RemoveRank(rank.metrics);
  }
  auto fresh = std::make_unique<JobState>(old.name, options_.reduce);
  fresh->world_size = hello.world_size();
  fresh->epoch = old.epoch;  // The hello raises it (and marks the registration).
  fresh->owner_uid = old.owner_uid;
  fresh->metrics = old.metrics;
  fresh->profile_all = old.profile_all;
  fresh->directive_plan_versions = std::move(old.directive_plan_versions);
  fresh->directive_order = std::move(old.directive_order);
  fresh->last_active_ns = old.last_active_ns;
  LOG(INFO) << "job restarted job=" << old.name << " epoch=" << old.epoch << "->" << hello.epoch()
            << " world_size=" << old.world_size << "->" << hello.world_size()
            << " old_ranks=" << old.ranks.size() << " sessions_closed=" << closed
            << " batches_carried=" << carried_.size() - carried;
  stats_.job_restarts++;
  slot = std::move(fresh);
}

void ShimHub::RemoveJob(std::map<std::string, std::unique_ptr<JobState>>::iterator it) {
  for (auto& [rank, r] : it->second->ranks) metrics_->RemoveRank(r.metrics);
  metrics_->RemoveJob(it->second->metrics);
  jobs_.erase(it);
}

void ShimHub::Flush(bool drain, std::vector<v1::TelemetryBatch>* out,
                    std::vector<uint64_t>* delivery_tags) {
  absl::MutexLock lock(&mu_);
  // Batches of jobs that restarted since the last flush (RestartJob) go first.
  for (size_t i = 0; i < carried_.size(); ++i) {
    out->push_back(std::move(carried_[i]));
    if (delivery_tags != nullptr) {
      delivery_tags->push_back(carried_tags_[i]);
    } else {
      marks_.erase(carried_tags_[i]);
    }
  }
  carried_.clear();
  carried_tags_.clear();
  const int64_t now = clock_.MonotonicNanos();
  const int64_t idle_ns = absl::ToInt64Nanoseconds(options_.job_idle_timeout);
  for (auto it = jobs_.begin(); it != jobs_.end();) {
    JobState& job = *it->second;
    const bool idle = !drain && job.LiveSessions() == 0 && now - job.last_active_ns >= idle_ns;
    FlushJob(job, drain || idle, now, out, delivery_tags);
    if (idle) {
      LOG(INFO) << "job idle, forgotten job=" << it->first << " idle_for="
                << absl::FormatDuration(absl::Nanoseconds(now - job.last_active_ns));
      RemoveJob(it++);
    } else {
      ++it;
    }
  }
}

std::vector<v1::JobRegistration> ShimHub::Registrations() const {
  absl::MutexLock lock(&mu_);
  std::vector<v1::JobRegistration> out;
  for (const auto& [name, job] : jobs_) out.push_back(job->Registration());
  return out;
}

void ShimHub::StopAccepting() {
  absl::MutexLock lock(&mu_);
  if (!accepting_) return;
  accepting_ = false;
  LOG(INFO) << "agent draining node=" << options_.node << " live_sessions=" << sessions_.size();
}

void ShimHub::CloseAll(const absl::Status& status) {
  absl::MutexLock lock(&mu_);
  for (auto& [id, s] : sessions_) s.stream->Close(status);
}

size_t ShimHub::live_sessions() const {
  absl::MutexLock lock(&mu_);
  return sessions_.size();
}

ShimHub::Stats ShimHub::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

reduce::JobReducer::Stats ShimHub::job_stats(const std::string& job) const {
  absl::MutexLock lock(&mu_);
  auto it = jobs_.find(job);
  return it == jobs_.end() ? reduce::JobReducer::Stats{} : it->second->reducer.stats();
}

}  // namespace falcon::agent
