#include "trainer/rank_trainer.h"

#include <fcntl.h>
#include <glog/logging.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/layer_split.h"
#include "nlohmann/json.hpp"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/directives/directive_sync.h"
#include "trainer/directives/layer_split.h"
#include "trainer/directives/remap.h"
#include "trainer/schedule/schedule.h"

namespace falcon::trainer {
namespace {

using collective::HostBuffer;

// Appends one line with a single write() on an O_APPEND descriptor, so the lines of concurrent
// ranks sharing a file never interleave.
absl::Status AppendLine(const std::string& path, const std::string& line) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (fd < 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot open JSON log '", path, "': ", std::strerror(errno)));
  }
  const std::string text = line + "\n";
  const bool ok = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  close(fd);
  if (!ok) return absl::UnavailableError(absl::StrCat("cannot write JSON log '", path, "'"));
  return absl::OkStatus();
}

// The end of an S2L or S3 ack's reason, what the move cost, which the controller reads
// (controller/mitigation/s2l_layer_split.h: AckNumber, S2LMeasurementOf).
std::string MoveCost(int64_t bytes_moved, double move_s, double pause_s) {
  return absl::StrFormat("bytes_moved=%d; move_s=%.6f; pause_s=%.6f", bytes_moved, move_s, pause_s);
}

std::string ResolveDir(const std::string& base, const std::string& dir) {
  if (dir.empty() || dir[0] == '/' || base.empty()) return dir;
  return absl::StrCat(base, "/", dir);
}

}  // namespace

absl::StatusOr<std::unique_ptr<RankTrainer>> RankTrainer::Create(
    TrainerOptions options, const model::Corpus* corpus,
    std::shared_ptr<collective::CommRuntime> runtime,
    std::unique_ptr<collective::Communicator> world, TrainerHooks* hooks,
    collective::fault::RankFaults* faults, const common::Clock* clock) {
  if (options.model.vocab_size != corpus->vocab_size()) {
    return absl::InvalidArgumentError(absl::StrCat("model vocab_size ", options.model.vocab_size,
                                                   " differs from the corpus's ",
                                                   corpus->vocab_size()));
  }
  if (absl::Status s = options.model.Validate(); !s.ok()) return s;
  if (absl::Status s = options.adam.Validate(); !s.ok()) return s;
  if (absl::Status s = directives::ValidateParallelConfig(
          world->size(), options.dp, options.pp, options.micro_batches, options.model.num_blocks);
      !s.ok()) {
    return s;
  }
  if (options.steps < 0) {
    return absl::InvalidArgumentError(absl::StrCat("--steps ", options.steps, " must be >= 0"));
  }
  absl::StatusOr<analysis::plan::Layout> layout =
      analysis::plan::Layout::Default(world->size(), options.dp, options.pp);
  if (!layout.ok()) return layout.status();
  std::unique_ptr<RankTrainer> t(new RankTrainer(std::move(options), corpus, std::move(runtime),
                                                 std::move(world), hooks, faults, clock,
                                                 *std::move(layout)));
  if (absl::Status s = t->Init(); !s.ok()) return s;
  return t;
}

RankTrainer::RankTrainer(TrainerOptions options, const model::Corpus* corpus,
                         std::shared_ptr<collective::CommRuntime> runtime,
                         std::unique_ptr<collective::Communicator> world, TrainerHooks* hooks,
                         collective::fault::RankFaults* faults, const common::Clock* clock,
                         analysis::plan::Layout layout)
    : options_(std::move(options)),
      corpus_(corpus),
      runtime_(std::move(runtime)),
      world_(std::move(world)),
      hooks_(hooks),
      faults_(faults),
      device_(options_.emulated_device),
      clock_(clock),
      rank_(world_->rank()),
      layout_(std::move(layout)) {}

absl::Status RankTrainer::Init() {
  const model::ModelConfig& c = options_.model;
  plan_ =
      directives::EvenMicroBatchPlan(layout_.dp_size(), layout_.pp_size(), options_.micro_batches);
  splits_ = directives::EvenSplits(layout_.dp_size(), layout_.pp_size(), c.num_blocks);
  bool resumed = false;
  if (!options_.resume_dir.empty()) {
    absl::StatusOr<checkpoint::CheckpointManifest> m =
        checkpoint::ReadManifest(options_.resume_dir);
    if (!m.ok()) return m.status();
    const model::ModelConfig& mc = m->model;
    if (mc.vocab_size != c.vocab_size || mc.context != c.context || mc.embed_dim != c.embed_dim ||
        mc.hidden != c.hidden || mc.ffn != c.ffn || mc.num_blocks != c.num_blocks ||
        mc.micro_batch_size != c.micro_batch_size || m->micro_batches != options_.micro_batches) {
      return absl::InvalidArgumentError(absl::StrCat(
          "checkpoint '", options_.resume_dir,
          "' is of another model or global batch (check --layers, --hidden, --micro-batches and "
          "the training text)"));
    }
    start_iteration_ = m->iteration;
    plan_version_ = m->plan_version;
    last_loss_ = m->last_loss;
    // The plan and the split in force carry over to the same shape (an S4 restart's new shape
    // starts even); a manifest without a split is of an even job.
    if (m->dp == layout_.dp_size() && m->pp == layout_.pp_size()) {
      plan_ = m->micro_batch_plan;
      if (!m->layer_split.empty()) splits_ = m->layer_split;
    }
    resumed = true;
  }
  stage_ = std::make_unique<model::StageModel>(
      c, LayersOfStage(c, splits_[layout_.at(rank_).dp], layout_.at(rank_).pp));
  stage_->InitParams(options_.seed);
  if (resumed) {
    for (int l = stage_->layers().first; l < stage_->layers().end; ++l) {
      const int64_t off = stage_->LayerOffset(l);
      if (absl::Status s = checkpoint::ReadLayer(options_.resume_dir, l, stage_->LayerSize(l),
                                                 stage_->params() + off, stage_->adam_m() + off,
                                                 stage_->adam_v() + off);
          !s.ok()) {
        return s;
      }
    }
  }
  absl::StatusOr<std::unique_ptr<collective::Communicator>> v = world_->Split(
      0, rank_, collective::CommLabel{collective::CommKind::COMM_KIND_WORLD, "validation"});
  if (!v.ok()) return v.status();
  validation_comm_ = *std::move(v);
  executor_ = std::make_unique<directives::ValidationExecutor>(
      validation_comm_.get(), runtime_.get(), faults_ != nullptr ? &faults_->compute() : nullptr,
      clock_);
  // An emulated device's GEMM and link pass (unless set): ten forward micro-batches' worth per
  // repetition.
  executor_->SetEmulatedGemmTime(options_.emulated_gemm.value_or(options_.emulated_compute * 10),
                                 &device_);
  executor_->SetEmulatedLinkTime(options_.emulated_link.value_or(options_.emulated_compute * 10));
  if (absl::Status s = BuildGroupComms(); !s.ok()) return s;
  const int64_t act = c.activation_floats();
  act_in_.assign(act, 0);
  act_out_.assign(act, 0);
  grad_in_.assign(act, 0);
  grad_out_.assign(act, 0);
  context_ids_.assign(int64_t{c.micro_batch_size} * c.context, 0);
  targets_.assign(c.micro_batch_size, 0);
  hooks_->RegisterValidationExecutor(executor_.get());
  hooks_->OnLayout(Context());
  return absl::OkStatus();
}

absl::Status RankTrainer::BuildGroupComms() {
  const analysis::plan::RankPlacement p = layout_.at(rank_);
  dp_comm_.reset();
  pp_comm_.reset();
  absl::StatusOr<std::unique_ptr<collective::Communicator>> dp = world_->Split(
      p.pp, p.dp,
      collective::CommLabel{collective::CommKind::COMM_KIND_DP, absl::StrCat("dp.pp", p.pp)});
  if (!dp.ok()) return dp.status();
  absl::StatusOr<std::unique_ptr<collective::Communicator>> pp = world_->Split(
      p.dp, p.pp,
      collective::CommLabel{collective::CommKind::COMM_KIND_PP, absl::StrCat("pp.dp", p.dp)});
  if (!pp.ok()) return pp.status();
  dp_comm_ = *std::move(dp);
  pp_comm_ = *std::move(pp);
  return BuildGradientReducer();
}

absl::Status RankTrainer::BuildGradientReducer() {
  const analysis::plan::RankPlacement p = layout_.at(rank_);
  grad_reducer_.reset();
  absl::StatusOr<std::unique_ptr<directives::SplitGradientReducer>> r =
      directives::SplitGradientReducer::Create(options_.model, splits_, p.dp, p.pp, *world_);
  if (!r.ok()) return r.status();
  grad_reducer_ = *std::move(r);
  return absl::OkStatus();
}

RankContext RankTrainer::Context() const {
  RankContext ctx;
  ctx.rank = rank_;
  ctx.world_size = layout_.world_size();
  ctx.dp_index = layout_.at(rank_).dp;
  ctx.pp_index = layout_.at(rank_).pp;
  ctx.dp_size = layout_.dp_size();
  ctx.pp_size = layout_.pp_size();
  ctx.global_micro_batches = options_.micro_batches;
  ctx.plan_version = plan_version_;
  ctx.world_comm_id = world_->id();
  ctx.validation_comm_id = validation_comm_->id();
  ctx.dp_comm_id = dp_comm_->id();
  ctx.pp_comm_id = pp_comm_->id();
  ctx.runtime = runtime_.get();
  return ctx;
}

absl::StatusOr<RunResult> RankTrainer::Run() {
  int64_t t = start_iteration_;
  // What the iteration before the next boundary ran with (reported after the boundary agreed).
  IterationReport r;
  r.rank = rank_;
  r.start_ns = clock_->MonotonicNanos();
  double loss_sum = 0;
  while (true) {
    auto report = [&](double agreed_loss_sum, int64_t agreed_ns) -> absl::Status {
      if (t == start_iteration_) return absl::OkStatus();
      r.iteration = t - 1;
      r.end_ns = agreed_ns;
      r.iteration_time_s = (agreed_ns - r.start_ns) * 1e-9;
      r.loss = agreed_loss_sum /
               (static_cast<double>(options_.micro_batches) * options_.model.micro_batch_size);
      last_loss_ = r.loss;
      hooks_->OnIteration(r);
      return LogIteration(r);
    };
    absl::StatusOr<BoundaryOutcome> b = Boundary(t, loss_sum, report);
    if (!b.ok()) return b.status();
    if (b->restart) {
      // Every rank has written its shard and acked; only then may any rank exit (the launcher
      // stops the others as soon as one exits).
      if (absl::Status s = world_->Barrier(); !s.ok()) return s;
      RunResult result;
      result.outcome = RunResult::Outcome::kCheckpointRestart;
      result.iteration = t;
      result.last_loss = last_loss_;
      result.checkpoint_dir = restart_dir_;
      result.excluded_ranks = restart_excluded_;
      return result;
    }
    if (t >= options_.steps) break;
    const analysis::plan::RankPlacement pos = layout_.at(rank_);
    r.pause_s = (b->end_ns - b->agreed_ns) * 1e-9;
    r.start_ns = b->end_ns;
    r.plan_version = plan_version_;
    r.dp_index = pos.dp;
    r.pp_index = pos.pp;
    r.micro_batches = plan_[pos.dp];
    r.stage_blocks = splits_[pos.dp];
    loss_sum = 0;
    if (absl::Status s = RunIteration(t, &loss_sum, &r.compute_s); !s.ok()) return s;
    ++t;
  }
  if (!options_.checkpoint_dir.empty()) {
    if (absl::Status s = WriteCheckpoint(options_.checkpoint_dir, t, {}, /*restart=*/false);
        !s.ok())
      return s;
  }
  RunResult result;
  result.iteration = t;
  result.last_loss = last_loss_;
  return result;
}

absl::Status RankTrainer::RunIteration(int64_t t, double* loss_sum, double* compute_s) {
  runtime_->SetIteration(t);
  if (faults_ != nullptr) {
    if (absl::Status s = faults_->OnIteration(t); !s.ok()) return s;
  }
  const model::ModelConfig& c = options_.model;
  const analysis::plan::RankPlacement pos = layout_.at(rank_);
  const int m = plan_[pos.dp];
  const int offset = directives::MicroBatchOffset(plan_, pos.dp);
  const float loss_scale =
      static_cast<float>(1.0 / (static_cast<double>(options_.micro_batches) * c.micro_batch_size));
  const int prev = pos.pp - 1, next = pos.pp + 1;  // PP comm ranks are stage indices.
  int64_t compute_ns = 0;
  const int blocks_held = splits_[pos.dp][pos.pp];
  // Times `fn` as compute and stretches it by the active compute fault, if any.
  // `emulated`: units of options_.emulated_compute this phase also spends on the emulated device
  // (which the host waits for), scaled by the blocks the stage holds and stretched by an
  // in-process test fault's factor.
  auto compute = [&](auto&& fn, int emulated = 0) {
    const int64_t start = clock_->MonotonicNanos();
    fn();
    if (faults_ != nullptr) {
      faults_->compute().Apply(t, absl::Nanoseconds(clock_->MonotonicNanos() - start));
    }
    if (emulated > 0 && options_.emulated_compute > absl::ZeroDuration()) {
      const double factor = faults_ != nullptr ? faults_->compute().FactorAt(t) : 1.0;
      device_.Run(directives::EmulatedStageTime(options_.emulated_compute, emulated * factor,
                                                blocks_held, c.num_blocks, layout_.pp_size()));
    }
    compute_ns += clock_->MonotonicNanos() - start;
  };
  auto act = [](std::vector<float>& v) { return HostBuffer(v.data(), v.size()); };
  stage_->ZeroGrads();
  for (const schedule::PipeOp& op : schedule::OneFOneBSchedule(layout_.pp_size(), pos.pp, m)) {
    const int64_t micro = offset + op.micro;
    absl::Status s;
    switch (op.kind) {
      case schedule::PipeOpKind::kRecvForward:
        s = pp_comm_->Recv(act(act_in_), prev);
        break;
      case schedule::PipeOpKind::kForward:
        compute(
            [&] {
              if (stage_->has_embedding() || stage_->has_head()) {
                corpus_->FillMicroBatch(options_.seed, t, micro, c.micro_batch_size, c.context,
                                        context_ids_.data(), targets_.data());
              }
              *loss_sum += stage_->Forward(micro, context_ids_.data(), act_in_.data(),
                                           targets_.data(), loss_scale, act_out_.data());
            },
            1);
        break;
      case schedule::PipeOpKind::kSendForward:
        s = pp_comm_->Send(act(act_out_), next);
        break;
      case schedule::PipeOpKind::kRecvBackward:
        s = pp_comm_->Recv(act(grad_in_), next);
        break;
      case schedule::PipeOpKind::kBackward:
        compute([&] { stage_->Backward(micro, grad_in_.data(), grad_out_.data()); }, 2);
        break;
      case schedule::PipeOpKind::kSendBackward:
        s = pp_comm_->Send(act(grad_out_), prev);
        break;
    }
    if (!s.ok()) return s;
  }
  if (absl::Status s = grad_reducer_->AllReduce(*stage_, *dp_comm_); !s.ok()) return s;
  compute([&] {
    AdamStep(options_.adam, t + 1, stage_->num_params(), stage_->params(), stage_->grads(),
             stage_->adam_m(), stage_->adam_v());
  });
  *compute_s = compute_ns * 1e-9;
  return absl::OkStatus();
}

absl::StatusOr<RankTrainer::BoundaryOutcome> RankTrainer::Boundary(
    int64_t t, double loss_sum,
    const std::function<absl::Status(double loss_sum, int64_t agreed_ns)>& report) {
  // The first agreement ends iteration t - 1 (its report ends when the agreement completes): its
  // ops are that iteration's communication (the wait for the slowest rank included), not time
  // outside communication the agent would count as compute. Later rounds (a pause) lie between
  // iterations: stamped t, outside both.
  runtime_->SetIteration(t > start_iteration_ ? t - 1 : t);
  BoundaryOutcome out;
  bool first = true;
  while (true) {
    directives::BoundaryMessage mine;
    mine.directives = hooks_->PollDirectives(t);
    if (paused_) mine.tasks = hooks_->PollValidationTasks(t);
    if (first) mine.loss_sum = loss_sum;
    mine.pause_expired = paused_ && clock_->MonotonicNanos() >= pause_deadline_ns_;
    absl::StatusOr<directives::AgreedBoundary> agreed = AgreeAtBoundary(*world_, mine);
    if (!agreed.ok()) return agreed.status();
    if (first) {
      out.loss_sum = agreed->loss_sum;
      out.agreed_ns = clock_->MonotonicNanos();
      first = false;
      runtime_->SetIteration(t);
      if (absl::Status s = report(out.loss_sum, out.agreed_ns); !s.ok()) return s;
    }
    // A directive this rank's hooks deliver again is acknowledged again with its first outcome.
    // The first delivery of one this rank already applied (the ranks agreed on another rank's
    // copy a boundary earlier) is not: its outcome was acknowledged when it was applied.
    for (const falcon::v1::Directive& d : mine.directives) {
      const bool again = !queue_.MarkDelivered(d.directive_id());
      const directives::DirectiveOutcome* o = queue_.OutcomeOf(d.directive_id());
      if (again && o != nullptr) Ack(d, o->status, o->reason, o->applied_iteration);
    }
    for (const falcon::v1::Directive& d : queue_.Add(agreed->directives)) {
      if (d.effective_iteration() > t) {
        Ack(d, falcon::v1::ACK_STATUS_RECEIVED,
            absl::StrCat("queued for iteration ", d.effective_iteration()), -1);
      }
    }
    if (paused_) {
      if (absl::Status s = RunValidationTasks(agreed->tasks); !s.ok()) return s;
    }
    for (const falcon::v1::Directive& d : queue_.PopDue(t)) {
      if (absl::Status s = Apply(d, t, &out.restart); !s.ok()) return s;
      if (out.restart) break;
    }
    if (out.restart) break;
    if (paused_ && agreed->pause_expired) {  // The pause released itself.
      paused_ = false;
      DropPendingTasks("the pause expired");
    }
    if (!paused_) break;
    absl::SleepFor(options_.poll_interval);
  }
  out.end_ns = clock_->MonotonicNanos();
  return out;
}

absl::Status RankTrainer::RunValidationTasks(
    const std::vector<falcon::v1::ValidationTask>& agreed) {
  // Every rank walks the same agreed lists: a task already run (delivered again to a rank later)
  // is skipped everywhere.
  for (const falcon::v1::ValidationTask& task : agreed) {
    if (tasks_run_.count(task.task_id()) == 0) pending_tasks_.emplace(task.task_id(), task);
  }
  if (pending_tasks_.empty()) return absl::OkStatus();
  uint32_t expected = 0;  // Tasks in the validation (0: a controller that does not say).
  for (const auto& [id, task] : pending_tasks_) {
    expected = std::max(expected, task.validation_tasks());
  }
  absl::Duration rest;
  const int max_polls = static_cast<int>(std::max<int64_t>(
      1, absl::IDivDuration(options_.task_set_wait,
                            std::max(options_.poll_interval, absl::Milliseconds(1)), &rest)));
  if (tasks_run_.size() + pending_tasks_.size() < expected && ++pending_task_polls_ < max_polls) {
    return absl::OkStatus();  // The rest of the validation is on its way.
  }
  pending_task_polls_ = 0;
  std::map<uint64_t, falcon::v1::ValidationTask> run;
  run.swap(pending_tasks_);
  // task_id order, round by round: a world barrier before each round keeps one round's
  // measurements from overlapping the previous one's; the tasks of a round are on disjoint nodes
  // and run at the same time (common.proto).
  std::optional<uint32_t> round;  // Of the previous task run.
  for (const auto& [id, task] : run) {
    tasks_run_.insert(id);
    const bool same_round = round.has_value() && task.round() != 0 && task.round() == *round;
    if (round.has_value() && !same_round) {
      if (absl::Status s = world_->Barrier(); !s.ok()) return s;
    }
    round = task.round();
    if (!Answers(task)) continue;
    hooks_->ReportValidation(executor_->Run(task));
  }
  return absl::OkStatus();
}

bool RankTrainer::Answers(const falcon::v1::ValidationTask& task) const {
  // A task naming no rank is answered (with its error) by rank 0, so it is not lost unheard.
  return executor_->Participates(task) || (task.ranks().empty() && rank_ == 0);
}

void RankTrainer::DropPendingTasks(const std::string& why) {
  for (const auto& [id, task] : pending_tasks_) {
    if (!Answers(task)) continue;
    falcon::v1::ValidationResult r;
    r.set_task_id(id);
    r.set_job(task.job());
    r.set_rank(static_cast<uint32_t>(rank_));
    r.set_error(absl::StrCat("not run: ", why, " with ", tasks_run_.size() + pending_tasks_.size(),
                             " of the validation's ", task.validation_tasks(), " tasks in"));
    hooks_->ReportValidation(r);
  }
  pending_tasks_.clear();
  pending_task_polls_ = 0;
}

void RankTrainer::Ack(const falcon::v1::Directive& d, falcon::v1::AckStatus status,
                      const std::string& reason, int64_t applied_iteration) {
  if (directives::IsTarget(d, rank_)) hooks_->Ack(d, status, reason, applied_iteration);
}

absl::Status RankTrainer::Apply(const falcon::v1::Directive& d, int64_t t, bool* restart) {
  directives::PlanState state;
  state.layout = &layout_;
  state.micro_batches = &plan_;
  state.total_micro_batches = options_.micro_batches;
  state.num_blocks = options_.model.num_blocks;
  state.paused = paused_;
  if (absl::Status check = CheckDirective(d, state); !check.ok()) {
    const std::string reason(check.message());
    queue_.Record(d.directive_id(), {falcon::v1::ACK_STATUS_REJECTED, reason, -1});
    Ack(d, falcon::v1::ACK_STATUS_REJECTED, reason, -1);
    return absl::OkStatus();
  }
  std::string reason;
  switch (d.kind_case()) {
    case falcon::v1::Directive::kMicroBatchPlan:
      plan_.assign(d.micro_batch_plan().micro_batches().begin(),
                   d.micro_batch_plan().micro_batches().end());
      reason = absl::StrCat("micro-batches per DP group: ", absl::StrJoin(plan_, ","));
      break;
    case falcon::v1::Directive::kTopologyChange:
      if (absl::Status s = ApplyTopology(d, &reason); !s.ok()) return s;
      break;
    case falcon::v1::Directive::kLayerSplit:
      if (absl::Status s = ApplyLayerSplit(d, t, &reason); !s.ok()) return s;
      break;
    case falcon::v1::Directive::kCheckpointRestart: {
      restart_dir_ = ResolveDir(options_.checkpoint_dir, d.checkpoint_restart().checkpoint_dir());
      restart_epoch_ = d.epoch();
      restart_excluded_.assign(d.checkpoint_restart().excluded_ranks().begin(),
                               d.checkpoint_restart().excluded_ranks().end());
      if (absl::Status s = WriteCheckpoint(restart_dir_, t, restart_excluded_, /*restart=*/true);
          !s.ok())
        return s;
      reason =
          absl::StrCat("checkpoint of iteration ", t, " written to ", restart_dir_,
                       "; restarting without ranks [", absl::StrJoin(restart_excluded_, ","), "]");
      *restart = true;
      break;
    }
    case falcon::v1::Directive::kPause:
      paused_ = true;
      tasks_run_.clear();  // A new validation: its tasks have new ids.
      pending_tasks_.clear();
      pending_task_polls_ = 0;
      pause_deadline_ns_ = clock_->MonotonicNanos() + d.pause().max_duration_ns();
      reason = "paused";
      break;
    case falcon::v1::Directive::kResume:
      paused_ = false;
      DropPendingTasks("the pause ended");
      reason = "resumed";
      break;
    default:
      reason = "applied";  // CheckDirective lets no other kind through; never an empty reason.
      break;
  }
  if (d.plan_version() > plan_version_ &&
      (d.has_micro_batch_plan() || d.has_topology_change() || d.has_layer_split())) {
    plan_version_ = d.plan_version();
  }
  queue_.Record(d.directive_id(), {falcon::v1::ACK_STATUS_APPLIED, reason, t});
  Ack(d, falcon::v1::ACK_STATUS_APPLIED, reason, t);
  return absl::OkStatus();
}

absl::Status RankTrainer::ApplyTopology(const falcon::v1::Directive& d, std::string* reason) {
  const int64_t start = clock_->MonotonicNanos();
  absl::StatusOr<analysis::plan::Layout> next =
      directives::LayoutFromTopologyChange(d.topology_change(), layout_.world_size());
  if (!next.ok()) return next.status();
  // The split in force stays with its DP index while the shape stays; a new shape starts even.
  const bool dp_changed = next->dp_size() != layout_.dp_size();
  const bool shape_changed = dp_changed || next->pp_size() != layout_.pp_size();
  directives::Placement to{*next, shape_changed
                                      ? directives::EvenSplits(next->dp_size(), next->pp_size(),
                                                               options_.model.num_blocks)
                                      : splits_};
  const std::vector<directives::LayerTransfer> plan =
      directives::PlanRemap(options_.model, directives::Placement{layout_, splits_}, to);
  const int64_t move_start = clock_->MonotonicNanos();
  absl::StatusOr<std::unique_ptr<model::StageModel>> stage =
      ExecuteRemap(options_.model, to, plan, *stage_, *world_);
  if (!stage.ok()) return stage.status();
  const double move_s = (clock_->MonotonicNanos() - move_start) * 1e-9;
  stage_ = *std::move(stage);
  layout_ = std::move(to.layout);
  splits_ = std::move(to.splits);
  if (dp_changed)
    plan_ = directives::EvenMicroBatchPlan(layout_.dp_size(), layout_.pp_size(),
                                           options_.micro_batches);
  if (absl::Status s = BuildGroupComms(); !s.ok()) return s;
  const double pause_s = (clock_->MonotonicNanos() - start) * 1e-9;
  *reason =
      absl::StrFormat("remapped to %s; moved %d layer copies; %s", layout_.ToString(), plan.size(),
                      MoveCost(RemapBytes(options_.model, plan), move_s, pause_s));
  hooks_->OnLayout(Context());
  return absl::OkStatus();
}

absl::Status RankTrainer::ApplyLayerSplit(const falcon::v1::Directive& d, int64_t t,
                                          std::string* reason) {
  const int64_t start = clock_->MonotonicNanos();
  const int blocks = options_.model.num_blocks;
  directives::Placement to{layout_, common::StageBlocksOf(d.layer_split())};
  const std::vector<directives::LayerTransfer> plan =
      directives::PlanRemap(options_.model, directives::Placement{layout_, splits_}, to);
  const int64_t move_start = clock_->MonotonicNanos();
  absl::StatusOr<std::unique_ptr<model::StageModel>> stage =
      ExecuteRemap(options_.model, to, plan, *stage_, *world_);
  if (!stage.ok()) return stage.status();
  const double move_s = (clock_->MonotonicNanos() - move_start) * 1e-9;
  stage_ = *std::move(stage);
  splits_ = std::move(to.splits);
  plan_.assign(d.layer_split().micro_batches().begin(), d.layer_split().micro_batches().end());
  if (absl::Status s = BuildGradientReducer(); !s.ok()) return s;
  const double pause_s = (clock_->MonotonicNanos() - start) * 1e-9;
  const int64_t bytes = RemapBytes(options_.model, plan);
  *reason =
      absl::StrFormat("layer split %s; micro-batches per DP group: %s; moved %d block copies; %s",
                      common::SplitText(splits_, blocks), absl::StrJoin(plan_, ","), plan.size(),
                      MoveCost(bytes, move_s, pause_s));
  if (rank_ == 0) {
    LOG(INFO) << "layer split applied iteration=" << t << " directive=" << d.directive_id()
              << " split=\"" << common::SplitText(splits_, blocks)
              << "\" micro_batches=" << absl::StrJoin(plan_, ",")
              << " moved_block_copies=" << plan.size() << " bytes_moved=" << bytes
              << absl::StrFormat(" move_s=%.6f pause_s=%.6f", move_s, pause_s);
  }
  return absl::OkStatus();
}

absl::Status RankTrainer::WriteCheckpoint(const std::string& dir, int64_t t,
                                          const std::vector<int>& excluded, bool restart) {
  if (layout_.at(rank_).dp == 0) {
    for (int l = stage_->layers().first; l < stage_->layers().end; ++l) {
      const int64_t off = stage_->LayerOffset(l);
      if (absl::Status s =
              checkpoint::WriteLayer(dir, l, stage_->LayerSize(l), stage_->params() + off,
                                     stage_->adam_m() + off, stage_->adam_v() + off);
          !s.ok()) {
        return s;
      }
    }
  }
  if (absl::Status s = world_->Barrier(); !s.ok()) return s;
  if (rank_ == 0) {
    checkpoint::CheckpointManifest m;
    m.iteration = t;
    m.plan_version = plan_version_;
    m.seed = options_.seed;
    m.model = options_.model;
    m.world = layout_.world_size();
    m.dp = layout_.dp_size();
    m.pp = layout_.pp_size();
    m.micro_batches = options_.micro_batches;
    m.micro_batch_plan = plan_;
    m.layer_split = splits_;
    m.excluded_ranks = excluded;
    m.last_loss = last_loss_;
    if (absl::Status s = WriteManifest(dir, m); !s.ok()) return s;
    if (restart && !options_.restart_file.empty()) {
      // For the launcher; written before the barrier, so it exists before any rank exits.
      const nlohmann::json request = {{"checkpoint_dir", dir},
                                      {"excluded_ranks", excluded},
                                      {"iteration", t},
                                      {"epoch", restart_epoch_}};
      const std::string tmp = options_.restart_file + ".tmp";
      std::remove(tmp.c_str());
      if (absl::Status s = AppendLine(tmp, request.dump()); !s.ok()) return s;
      if (std::rename(tmp.c_str(), options_.restart_file.c_str()) != 0) {
        return absl::UnavailableError(
            absl::StrCat("cannot write restart request '", options_.restart_file, "'"));
      }
    }
  }
  return world_->Barrier();
}

absl::Status RankTrainer::LogIteration(const IterationReport& r) const {
  if (options_.json_log_path.empty()) return absl::OkStatus();
  const nlohmann::ordered_json j = {{"iteration", r.iteration},
                                    {"rank", r.rank},
                                    {"loss", r.loss},
                                    {"iteration_time_s", r.iteration_time_s},
                                    {"plan_version", r.plan_version},
                                    {"dp", r.dp_index},
                                    {"pp", r.pp_index},
                                    {"micro_batches", r.micro_batches},
                                    {"compute_s", r.compute_s},
                                    {"pause_s", r.pause_s},
                                    {"stage_blocks", r.stage_blocks}};
  return AppendLine(options_.json_log_path, j.dump());
}

}  // namespace falcon::trainer
