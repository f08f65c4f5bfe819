#include "trainer_shim/shim.h"

#include <unistd.h>

#include <algorithm>
#include <iostream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/op_kind.h"

namespace falcon::trainer_shim {
namespace {

using falcon::v1::Directive;

constexpr absl::Duration kHoldSlice = absl::Milliseconds(10);

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

bool IncludesRank(const google::protobuf::RepeatedField<uint32_t>& ranks, uint32_t rank) {
  return ranks.empty() || std::find(ranks.begin(), ranks.end(), rank) != ranks.end();
}

std::string HostName() {
  char buf[256] = {};
  if (gethostname(buf, sizeof(buf) - 1) != 0 || buf[0] == '\0') return "unknown";
  return buf;
}

// A trainer that applies directives checks plans against its current layout (which S3
// changes), so the intake does not check them against the layout at start; the model's block
// count does not change, and is checked either way.
DirectiveIntake::Options IntakeOptions(const ShimOptions& o) {
  DirectiveIntake::Options i;
  i.job = o.job;
  i.rank = o.rank;
  i.world_size = o.world_size;
  i.epoch = o.epoch;
  const bool layout = !o.trainer_applies_directives;
  i.dp_size = layout ? o.dp_size : 0;
  i.pp_size = layout ? o.pp_size : 0;
  i.global_micro_batches = layout ? o.global_micro_batches : 0;
  i.pipeline_blocks = o.pipeline_blocks;
  i.agreed = o.agreed_directives;
  return i;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Shim>> Shim::Create(ShimOptions options,
                                                   const common::Clock* clock) {
  if (absl::Status s = options.Validate(); !s.ok()) return s;
  if (options.node.empty()) options.node = HostName();
  if (options.pid <= 0) options.pid = static_cast<int32_t>(getpid());
  std::unique_ptr<Shim> shim(new Shim(std::move(options), clock));
  shim->link_->Start();
  return shim;
}

Shim::Shim(ShimOptions options, const common::Clock* clock)
    : options_(std::move(options)),
      owned_clock_(clock == nullptr ? std::make_unique<common::RealClock>() : nullptr),
      clock_(clock == nullptr ? owned_clock_.get() : clock),
      ring_(options_.ring_capacity),
      intake_(IntakeOptions(options_)),
      profiling_(options_.profiling),
      owner_pid_(getpid()) {
  AgentLink::Listener* listener = this;
  link_ = std::make_unique<AgentLink>(options_, &ring_, &ring_dropped_, listener,
                                      [this] { return MakeHello(); });
}

Shim::~Shim() { Shutdown(); }

void Shim::Shutdown() {
  if (stopped_.exchange(true)) return;
  if (getpid() != owner_pid_) {
    // A forked child: the shim's threads exist only in the parent, and its locks may have been
    // held at fork time. Only mark it stopped.
    link_->Stop();
    return;
  }
  link_->Stop();
  NotifyHold();  // Releases a pause.
}

void Shim::Log(std::string_view message) const {
  if (options_.log) {
    options_.log(message);
  } else {
    std::cerr << "[falcon_shim rank " << options_.rank << "] " << message << "\n";
  }
}

absl::Status Shim::RecordOp(OpRecord record) {
  if (stopped_.load(std::memory_order_relaxed)) {
    return absl::FailedPreconditionError("shim is shut down");
  }
  if (absl::Status s = ValidateOpRecord(record); !s.ok()) {
    records_rejected_.fetch_add(1, std::memory_order_relaxed);
    return s;
  }
  // NCCL allows a send to oneself (it moves no data between ranks); the agent refuses a batch
  // holding one, so it must not get into the ring.
  if (common::HasPeer(record.op_kind) && record.peer == static_cast<int64_t>(options_.rank)) {
    records_rejected_.fetch_add(1, std::memory_order_relaxed);
    return absl::InvalidArgumentError(
        absl::StrCat("op_record.peer: ", record.peer, " is this rank itself"));
  }
  if (record.iteration < 0) record.iteration = current_iteration_.load(std::memory_order_relaxed);
  while (producer_lock_.exchange(true, std::memory_order_acquire)) {
    while (producer_lock_.load(std::memory_order_relaxed)) CpuRelax();
  }
  const uint64_t seq = next_seq_.load(std::memory_order_relaxed) + 1;
  record.seq = seq;
  const bool pushed = ring_.TryPush(record);
  if (pushed) next_seq_.store(seq, std::memory_order_relaxed);
  producer_lock_.store(false, std::memory_order_release);
  if (!pushed) {
    ring_dropped_.fetch_add(1, std::memory_order_relaxed);
    return absl::ResourceExhaustedError("op ring full: record dropped");
  }
  return absl::OkStatus();
}

absl::Status Shim::RegisterCommunicator(const CommunicatorInfo& communicator) {
  if (absl::Status s = ValidateCommunicator(communicator, options_.world_size); !s.ok()) return s;
  if (std::find(communicator.member_ranks.begin(), communicator.member_ranks.end(),
                options_.rank) == communicator.member_ranks.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("communicator.member_ranks: this rank (", options_.rank, ") is not a member"));
  }
  falcon::v1::Communicator proto;
  ToProto(communicator, &proto);
  link_->RegisterCommunicator(proto);
  return absl::OkStatus();
}

absl::Status Shim::RecordIteration(const IterationHint& hint) {
  if (absl::Status s = ValidateIterationHint(hint); !s.ok()) return s;
  falcon::v1::IterationHint proto;
  ToProto(hint, &proto);
  link_->SendHint(proto);
  return absl::OkStatus();
}

void Shim::SetPauseHandler(PauseHandler handler) {
  absl::MutexLock lock(&mu_);
  pause_handler_ = std::move(handler);
}

void Shim::SetValidationExecutor(ValidationExecutor executor) {
  absl::MutexLock lock(&mu_);
  validation_executor_ = std::move(executor);
}

bool Shim::profiling() const {
  if (!profiling_.load(std::memory_order_relaxed)) return false;
  const int64_t until = profiling_until_ns_.load(std::memory_order_relaxed);
  return until == 0 || clock_->MonotonicNanos() < until;
}

Shim::Stats Shim::stats() const {
  Stats s;
  {
    absl::MutexLock lock(&mu_);
    s = counters_;
  }
  s.records_accepted = next_seq_.load(std::memory_order_relaxed);
  s.records_dropped_ring = ring_dropped_.load(std::memory_order_relaxed);
  s.records_rejected = records_rejected_.load(std::memory_order_relaxed);
  s.paused = paused();
  s.profiling = profiling();
  s.epoch = epoch();
  s.link = link_->stats();
  return s;
}

falcon::v1::ShimHello Shim::MakeHello() const {
  falcon::v1::ShimHello hello;
  hello.set_job(options_.job);
  falcon::v1::RankInfo* r = hello.mutable_rank();
  r->set_rank(options_.rank);
  r->set_node(options_.node);
  r->set_local_rank(options_.local_rank);
  r->set_gpu(options_.gpu);
  r->set_pid(options_.pid);
  r->set_dp_index(options_.dp_index);
  r->set_pp_index(options_.pp_index);
  r->set_tp_index(options_.tp_index);
  hello.set_world_size(options_.world_size);
  hello.set_epoch(intake_.epoch());
  hello.set_dp_size(options_.dp_size);
  hello.set_pp_size(options_.pp_size);
  hello.set_tp_size(options_.tp_size);
  hello.set_global_micro_batches(options_.global_micro_batches);
  hello.set_pipeline_blocks(options_.pipeline_blocks);
  hello.set_block_state_bytes(options_.block_state_bytes);
  hello.set_version(kShimVersion);
  return hello;
}

void Shim::SendAck(const falcon::v1::DirectiveAck& ack) {
  {
    absl::MutexLock lock(&mu_);
    switch (ack.status()) {
      case falcon::v1::ACK_STATUS_RECEIVED:
        ++counters_.directives_received;
        break;
      case falcon::v1::ACK_STATUS_APPLIED:
        ++counters_.directives_applied;
        break;
      case falcon::v1::ACK_STATUS_REJECTED:
        ++counters_.directives_rejected;
        break;
      default:
        break;
    }
  }
  if (ack.status() == falcon::v1::ACK_STATUS_REJECTED) {
    Log(absl::StrCat("rejected directive ", ack.directive_id(), ": ", ack.reason()));
  }
  falcon::v1::ShimMessage m;
  *m.mutable_directive_ack() = ack;
  link_->SendControl(std::move(m));
}

void Shim::NotifyHold() {
  absl::MutexLock lock(&mu_);
  ++hold_events_;
}

void Shim::OnWelcome(const falcon::v1::ShimWelcome& welcome) {
  if (welcome.profiling()) {
    profiling_until_ns_.store(0, std::memory_order_relaxed);
    profiling_.store(true, std::memory_order_relaxed);
  }
}

void Shim::OnDirective(const Directive& directive) {
  if (options_.trainer_applies_directives) {
    DirectiveIntake::Screened screened = intake_.ScreenForTrainer(directive);
    if (screened.reply.has_value()) SendAck(*screened.reply);
    if (!screened.forward) return;
    if (directive.kind_case() == Directive::kProfiling) {  // The shim's own; not the trainer's.
      ApplyProfiling(directive.profiling());
      std::optional<falcon::v1::DirectiveAck> ack =
          intake_.TrainerAck(directive, falcon::v1::ACK_STATUS_APPLIED, "",
                             current_iteration_.load(std::memory_order_relaxed));
      if (ack.has_value() && IncludesRank(directive.target_ranks(), options_.rank)) SendAck(*ack);
      return;
    }
    absl::MutexLock lock(&mu_);
    trainer_directives_.push_back(directive);
    return;
  }
  std::optional<falcon::v1::DirectiveAck> ack = intake_.Receive(directive);
  if (ack.has_value()) SendAck(*ack);
  NotifyHold();
}

void Shim::OnProfiling(const falcon::v1::ProfilingControl& control) {
  if (!control.job().empty() && control.job() != options_.job) {
    Log(absl::StrCat("ignored profiling control for job '", control.job(), "'"));
    return;
  }
  ApplyProfiling(control);
}

void Shim::ApplyProfiling(const falcon::v1::ProfilingControl& control) {
  if (!IncludesRank(control.ranks(), options_.rank)) return;
  const int64_t until = control.enabled() && control.max_duration_ns() > 0
                            ? clock_->MonotonicNanos() + control.max_duration_ns()
                            : 0;
  profiling_until_ns_.store(until, std::memory_order_relaxed);
  profiling_.store(control.enabled(), std::memory_order_relaxed);
}

void Shim::OnAgentError(const falcon::v1::FieldError& error) {
  Log(absl::StrCat("agent rejected a message: ", error.field(), ": ", error.message()));
}

absl::Status Shim::CheckValidationTask(const falcon::v1::ValidationTask& t) const {
  auto bad = [](auto&&... parts) { return absl::InvalidArgumentError(absl::StrCat(parts...)); };
  if (t.task_id() == 0) return bad("validation_task.task_id: must be > 0");
  if (t.job() != options_.job) {
    return bad("validation_task.job: '", t.job(), "' is not this shim's job '", options_.job, "'");
  }
  if (t.epoch() < intake_.epoch()) {
    return bad("validation_task.epoch: stale epoch ", t.epoch(), " < shim epoch ", intake_.epoch());
  }
  auto in = [](uint32_t v, uint32_t lo, uint32_t hi) { return v >= lo && v <= hi; };
  switch (t.test_case()) {
    case falcon::v1::ValidationTask::kGemm: {
      const auto& g = t.gemm();
      if (!in(g.m(), 1, 65536) || !in(g.n(), 1, 65536) || !in(g.k(), 1, 65536)) {
        return bad("validation_task.gemm.{m,n,k}: need [1, 65536]");
      }
      if (!in(g.repeats(), 1, 100)) return bad("validation_task.gemm.repeats: need [1, 100]");
      break;
    }
    case falcon::v1::ValidationTask::kLinkPass: {
      const auto& l = t.link_pass();
      if (l.links().empty()) return bad("validation_task.link_pass.links: empty");
      for (int i = 0; i < l.links_size(); ++i) {
        const auto& k = l.links(i);
        if (k.src_rank() >= options_.world_size || k.dst_rank() >= options_.world_size ||
            k.src_rank() == k.dst_rank()) {
          return bad("validation_task.link_pass.links[", i, "]: need distinct ranks < world_size");
        }
      }
      if (l.bytes() < 1 || l.bytes() > (uint64_t{1} << 30)) {
        return bad("validation_task.link_pass.bytes: need [1, 2^30]");
      }
      if (!in(l.repeats(), 1, 100)) return bad("validation_task.link_pass.repeats: need [1, 100]");
      break;
    }
    case falcon::v1::ValidationTask::TEST_NOT_SET:
      return bad("validation_task.test: not set");
  }
  return absl::OkStatus();
}

void Shim::OnValidationTask(const falcon::v1::ValidationTask& task) {
  if (!task.ranks().empty() && !IncludesRank(task.ranks(), options_.rank)) return;
  if (absl::Status s = CheckValidationTask(task); !s.ok()) {
    falcon::v1::ShimMessage m;
    falcon::v1::ValidationResult* r = m.mutable_validation_result();
    r->set_task_id(task.task_id());
    r->set_job(options_.job);
    r->set_rank(options_.rank);
    r->set_error(std::string(s.message()));
    {
      absl::MutexLock lock(&mu_);
      ++counters_.validation_tasks;
    }
    link_->SendControl(std::move(m));
    return;
  }
  absl::MutexLock lock(&mu_);
  validation_tasks_.push_back(task);
  validation_pending_.store(true, std::memory_order_release);
  ++hold_events_;
}

absl::StatusOr<std::vector<Directive>> Shim::TakeDirectives() {
  if (!options_.trainer_applies_directives) {
    return absl::FailedPreconditionError("TakeDirectives: trainer_applies_directives is off");
  }
  if (stopped_.load(std::memory_order_relaxed)) {
    return absl::FailedPreconditionError("shim is shut down");
  }
  absl::MutexLock lock(&mu_);
  std::vector<Directive> out;
  out.swap(trainer_directives_);
  return out;
}

absl::Status Shim::AckDirective(const Directive& directive, falcon::v1::AckStatus status,
                                const std::string& reason, int64_t applied_iteration) {
  if (!options_.trainer_applies_directives) {
    return absl::FailedPreconditionError("AckDirective: trainer_applies_directives is off");
  }
  if (stopped_.load(std::memory_order_relaxed)) {
    return absl::FailedPreconditionError("shim is shut down");
  }
  if (directive.directive_id() == 0) {
    return absl::InvalidArgumentError("directive.directive_id: must be > 0");
  }
  if (status != falcon::v1::ACK_STATUS_RECEIVED && status != falcon::v1::ACK_STATUS_APPLIED &&
      status != falcon::v1::ACK_STATUS_REJECTED) {
    return absl::InvalidArgumentError("ack.status: must be RECEIVED, APPLIED or REJECTED");
  }
  std::optional<falcon::v1::DirectiveAck> ack =
      intake_.TrainerAck(directive, status, reason, applied_iteration);
  if (ack.has_value()) SendAck(*ack);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<falcon::v1::ValidationTask>> Shim::TakeValidationTasks() {
  if (!options_.trainer_applies_directives) {
    return absl::FailedPreconditionError("TakeValidationTasks: trainer_applies_directives is off");
  }
  absl::MutexLock lock(&mu_);
  std::vector<falcon::v1::ValidationTask> out(validation_tasks_.begin(), validation_tasks_.end());
  validation_tasks_.clear();
  validation_pending_.store(false, std::memory_order_release);
  return out;
}

absl::Status Shim::ReportValidation(falcon::v1::ValidationResult result) {
  if (result.task_id() == 0) {
    return absl::InvalidArgumentError("validation_result.task_id: must be > 0");
  }
  if (stopped_.load(std::memory_order_relaxed)) {
    return absl::FailedPreconditionError("shim is shut down");
  }
  result.set_job(options_.job);
  result.set_rank(options_.rank);
  {
    absl::MutexLock lock(&mu_);
    ++counters_.validation_tasks;
  }
  falcon::v1::ShimMessage m;
  *m.mutable_validation_result() = std::move(result);
  link_->SendControl(std::move(m));
  return absl::OkStatus();
}

absl::Status Shim::SetIteration(int64_t iteration) {
  if (iteration < -1) return absl::InvalidArgumentError("iteration: must be >= -1");
  current_iteration_.store(iteration, std::memory_order_relaxed);
  return absl::OkStatus();
}

void Shim::RunValidationTasks() {
  for (;;) {
    falcon::v1::ValidationTask task;
    ValidationExecutor executor;
    {
      absl::MutexLock lock(&mu_);
      if (validation_tasks_.empty()) {
        validation_pending_.store(false, std::memory_order_release);
        return;
      }
      task = std::move(validation_tasks_.front());
      validation_tasks_.pop_front();
      executor = validation_executor_;
    }
    falcon::v1::ShimMessage m;
    falcon::v1::ValidationResult* r = m.mutable_validation_result();
    if (!executor) {
      r->set_error("no validation executor registered in this rank");
    } else {
      absl::StatusOr<falcon::v1::ValidationResult> result = executor(task);
      if (result.ok()) {
        *r = *std::move(result);
      } else {
        r->set_error(result.status().ToString());
      }
    }
    r->set_task_id(task.task_id());
    r->set_job(options_.job);
    r->set_rank(options_.rank);
    {
      absl::MutexLock lock(&mu_);
      ++counters_.validation_tasks;
    }
    link_->SendControl(std::move(m));
  }
}

void Shim::Hold(const Directive& pause, int64_t iteration, bool resume_follows) {
  PauseHandler handler;
  uint64_t seen = 0;
  {
    absl::MutexLock lock(&mu_);
    handler = pause_handler_;
    ++counters_.pauses;
    seen = hold_events_;
  }
  // The window starts before the pause becomes visible, so nobody can observe the pause and move
  // the clock before the deadline is fixed.
  const int64_t deadline_ns = clock_->MonotonicNanos() + pause.pause().max_duration_ns();
  paused_.store(true, std::memory_order_release);
  if (handler) handler(true);
  // APPLIED means "held now": sent only once the rank is paused.
  SendAck(intake_.Complete(pause, iteration, absl::OkStatus()));
  for (;;) {
    RunValidationTasks();
    if (resume_follows || stopped_.load()) break;
    if (std::optional<Directive> resume = intake_.TakeResume(); resume.has_value()) {
      SendAck(intake_.Complete(*resume, iteration, absl::OkStatus()));
      break;
    }
    const int64_t now_ns = clock_->MonotonicNanos();
    if (now_ns >= deadline_ns) {
      Log(absl::StrCat("pause ", pause.directive_id(), " released after max_duration_ns ",
                       pause.pause().max_duration_ns(), " without a resume"));
      break;
    }
    absl::MutexLock lock(&mu_);
    auto changed = [this, seen]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return hold_events_ != seen; };
    mu_.AwaitWithTimeout(absl::Condition(&changed),
                         std::min(absl::Nanoseconds(deadline_ns - now_ns), kHoldSlice));
    seen = hold_events_;
  }
  paused_.store(false, std::memory_order_release);
  if (handler) handler(false);
}

absl::Status Shim::PollDirectives(int64_t iteration, const DirectiveHandler& handler,
                                  const absl::flat_hash_set<uint64_t>* agreed) {
  if (iteration < -1) return absl::InvalidArgumentError("iteration: must be >= -1");
  if (stopped_.load(std::memory_order_relaxed)) {
    return absl::FailedPreconditionError("shim is shut down");
  }
  if (iteration >= 0) current_iteration_.store(iteration, std::memory_order_relaxed);
  if (!intake_.HasPending() && !validation_pending_.load(std::memory_order_acquire)) {
    return absl::OkStatus();
  }
  RunValidationTasks();
  DirectiveIntake::Due due = intake_.TakeDue(iteration, agreed);
  for (const falcon::v1::DirectiveAck& ack : due.acks) SendAck(ack);
  for (size_t i = 0; i < due.due.size(); ++i) {
    const Directive& d = due.due[i];
    switch (d.kind_case()) {
      case Directive::kPause: {
        const bool resume_follows =
            std::any_of(due.due.begin() + static_cast<std::ptrdiff_t>(i) + 1, due.due.end(),
                        [](const Directive& x) { return x.kind_case() == Directive::kResume; });
        Hold(d, iteration, resume_follows);
        break;
      }
      case Directive::kResume:  // Not paused (a hold consumes its own Resume): nothing to release.
        SendAck(intake_.Complete(d, iteration, absl::OkStatus()));
        // A pause still waiting for the ranks' agreement is over before it began.
        if (options_.agreed_directives) {
          for (const falcon::v1::DirectiveAck& ack : intake_.SupersedePauses(d.directive_id())) {
            SendAck(ack);
          }
        }
        break;
      case Directive::kProfiling:
        ApplyProfiling(d.profiling());
        SendAck(intake_.Complete(d, iteration, absl::OkStatus()));
        break;
      default: {
        absl::Status result =
            handler ? handler(d)
                    : absl::FailedPreconditionError(
                          "the trainer registered no handler for this directive kind");
        SendAck(intake_.Complete(d, iteration, result));
        break;
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace falcon::trainer_shim
