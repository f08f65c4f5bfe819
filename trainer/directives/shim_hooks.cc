#include "trainer/directives/shim_hooks.h"

#include <cmath>
#include <iostream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "collective/comm_runtime.h"
#include "proto/falcon/v1/common.pb.h"

namespace falcon::trainer::directives {

absl::StatusOr<std::unique_ptr<ShimTrainerHooks>> ShimTrainerHooks::Create(
    ShimTrainerHooksOptions options) {
  if (options.agent_socket.empty()) {
    return absl::InvalidArgumentError("agent_socket: empty (no agent to report to)");
  }
  if (options.world_size < 1 || options.rank < 0 || options.rank >= options.world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank: ", options.rank, " is outside the world of ", options.world_size));
  }
  if (options.local_rank < 0 || options.local_rank >= options.world_size) {
    return absl::InvalidArgumentError(absl::StrCat("local_rank: ", options.local_rank,
                                                   " is outside [0, ", options.world_size, ")"));
  }
  if (options.dp_size < 0 || options.pp_size < 0 || options.global_micro_batches < 0 ||
      options.pipeline_blocks < 0) {
    return absl::InvalidArgumentError(
        "dp_size, pp_size, global_micro_batches, pipeline_blocks: negative");
  }
  trainer_shim::ShimOptions o;
  o.job = options.job;
  o.rank = static_cast<uint32_t>(options.rank);
  o.world_size = static_cast<uint32_t>(options.world_size);
  o.node = options.node;
  o.local_rank = static_cast<uint32_t>(options.local_rank);
  o.dp_size = static_cast<uint32_t>(options.dp_size);
  o.pp_size = static_cast<uint32_t>(options.pp_size);
  o.tp_size = options.dp_size > 0 ? 1 : 0;
  if (options.dp_size > 0 && options.pp_size > 0) {
    // The trainer's default layout: rank r at dp = r % D, pp = r / D (analysis::Layout::Default).
    o.dp_index = options.rank % options.dp_size;
    o.pp_index = options.rank / options.dp_size;
    o.tp_index = 0;
  }
  o.global_micro_batches = static_cast<uint32_t>(options.global_micro_batches);
  o.pipeline_blocks = static_cast<uint32_t>(options.pipeline_blocks);
  o.block_state_bytes = options.block_state_bytes;
  o.epoch = options.epoch;
  o.agent_socket = options.agent_socket;
  o.trainer_applies_directives = true;
  o.log = std::move(options.log);
  absl::StatusOr<std::unique_ptr<trainer_shim::Shim>> shim =
      trainer_shim::Shim::Create(std::move(o));
  if (!shim.ok()) return shim.status();
  return std::unique_ptr<ShimTrainerHooks>(new ShimTrainerHooks(*std::move(shim)));
}

ShimTrainerHooks::~ShimTrainerHooks() {
  if (runtime_ != nullptr && runtime_->observer() == this) runtime_->SetObserver(nullptr);
  shim_->Shutdown();
}

void ShimTrainerHooks::Warn(std::string_view what, const absl::Status& status) {
  if (status.ok() || absl::IsFailedPrecondition(status)) return;  // Shut down: nothing to say.
  std::cerr << "[falcon_shim rank " << shim_->options().rank << "] " << what << ": "
            << status.message() << "\n";
}

void ShimTrainerHooks::OnLayout(const RankContext& context) {
  runtime_ = context.runtime;
  // Normally installed before the world was created (WorkerOptions::observer); a caller that did
  // not still gets the DP/PP/validation communicators' ops from here on.
  if (runtime_ != nullptr && runtime_->observer() == nullptr) runtime_->SetObserver(this);
  // The world communicator, in case its creation was not observed (ids are stable, so a second
  // registration only updates it).
  trainer_shim::CommunicatorInfo world;
  world.comm_id = context.world_comm_id;
  world.kind = common::CommKind::COMM_KIND_WORLD;
  world.name = "world";
  for (int r = 0; r < context.world_size; ++r) world.member_ranks.push_back(r);
  if (world.comm_id != 0) Warn("world communicator", shim_->RegisterCommunicator(world));
}

void ShimTrainerHooks::OnIteration(const IterationReport& report) {
  trainer_shim::IterationHint hint;
  hint.iteration = report.iteration;
  hint.start_ns = report.start_ns;
  hint.end_ns = std::max(report.end_ns, report.start_ns);
  hint.loss = std::isfinite(report.loss) ? report.loss : std::nan("");
  hint.plan_version = report.plan_version;
  Warn("iteration hint", shim_->RecordIteration(hint));
}

std::vector<falcon::v1::Directive> ShimTrainerHooks::PollDirectives(int64_t iteration) {
  Warn("iteration", shim_->SetIteration(iteration));
  absl::StatusOr<std::vector<falcon::v1::Directive>> d = shim_->TakeDirectives();
  if (!d.ok()) {
    Warn("directives", d.status());
    return {};
  }
  return *std::move(d);
}

void ShimTrainerHooks::Ack(const falcon::v1::Directive& directive, falcon::v1::AckStatus status,
                           const std::string& reason, int64_t applied_iteration) {
  Warn(absl::StrCat("ack of directive ", directive.directive_id()),
       shim_->AckDirective(directive, status, reason, applied_iteration));
}

std::vector<falcon::v1::ValidationTask> ShimTrainerHooks::PollValidationTasks(int64_t iteration) {
  (void)iteration;
  absl::StatusOr<std::vector<falcon::v1::ValidationTask>> t = shim_->TakeValidationTasks();
  if (!t.ok()) {
    Warn("validation tasks", t.status());
    return {};
  }
  return *std::move(t);
}

void ShimTrainerHooks::ReportValidation(const falcon::v1::ValidationResult& result) {
  Warn(absl::StrCat("validation result of task ", result.task_id()),
       shim_->ReportValidation(result));
}

void ShimTrainerHooks::OnOp(const collective::OpEvent& event) noexcept {
  trainer_shim::OpRecord r;
  r.comm_id = event.comm_id;
  r.bytes = event.bytes;
  r.host_start_ns = event.host_start_ns;
  r.host_end_ns = std::max(event.host_end_ns, event.host_start_ns);
  r.device_duration_ns = event.device_duration_ns;
  r.iteration = event.iteration;
  r.op_kind = event.kind;
  r.peer = event.peer;
  (void)shim_->RecordOp(r);  // Dropped records are counted by the shim; never block training.
}

void ShimTrainerHooks::OnCommCreated(const collective::CommInfo& info) noexcept {
  trainer_shim::CommunicatorInfo c;
  c.comm_id = info.comm_id;
  c.kind = info.kind;
  c.name = info.name;
  for (int32_t r : info.member_ranks) c.member_ranks.push_back(static_cast<uint32_t>(r));
  Warn(absl::StrCat("communicator ", info.name), shim_->RegisterCommunicator(c));
}

}  // namespace falcon::trainer::directives
