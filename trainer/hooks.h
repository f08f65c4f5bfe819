// The trainer's side of Falcon's in-process shim (trainer_shim/): what the trainer reports, and
// how directives and validation tasks reach it. The lead wires the shim to this interface; the
// trainer itself never depends on the shim. ScriptedHooks (directives/scripted_hooks.h) is the
// standalone implementation used by `falcon_train --directives FILE` and the tests.
//
// Call protocol (all calls come from the rank's training thread):
//   OnLayout        once at start and again after every S3 remap (new position, new comms).
//   PollDirectives  once per iteration boundary (before iteration `iteration` starts) and every
//                   poll interval while paused; returns directives due at `iteration`
//                   (effective_iteration <= iteration) not returned before. The trainer also
//                   accepts directives due later and holds them until their iteration.
//   PollValidationTasks  every poll interval while paused.
//   Ack             for every directive this rank is a target of, once per outcome: RECEIVED
//                   ("queued for iteration N") when queued for a later iteration, then APPLIED
//                   (applied_iteration = the boundary; reason: what changed) or REJECTED with the
//                   reason; the reason is never empty. An id PollDirectives returns again is acked
//                   again with its first outcome; an id it returns only after this rank applied it
//                   (the ranks agreed on another rank's copy) is not acked a second time.
//   ReportValidation  one result per validation task this rank took part in.
//   OnIteration     after every iteration, once the global loss is known.
//   RegisterValidationExecutor  once, so a shim that pauses by holding collective ops (the pause
//                   gate) can run validation from its own thread.
// Implementations must not block for long: they run on the training critical path.
#ifndef FALCON_TRAINER_HOOKS_H_
#define FALCON_TRAINER_HOOKS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "collective/comm_runtime.h"
#include "proto/falcon/v1/common.pb.h"

namespace falcon::trainer {

namespace directives {
class ValidationExecutor;
}  // namespace directives

// Where this rank sits, for the shim's hello and registration.
struct RankContext {
  int rank = 0;
  int world_size = 1;
  int dp_index = 0;
  int pp_index = 0;
  int dp_size = 1;
  int pp_size = 1;
  int global_micro_batches = 1;
  int64_t plan_version = 0;
  // Ids of this rank's communicators: world, validation, its DP communicator (stage's all-reduce)
  // and its PP communicator (pipeline). The collective observer announces them (OnCommCreated) too.
  uint64_t world_comm_id = 0;
  uint64_t validation_comm_id = 0;
  uint64_t dp_comm_id = 0;
  uint64_t pp_comm_id = 0;
  // The process's comm runtime (observer, pause gate, iteration hint). Not owned.
  collective::CommRuntime* runtime = nullptr;
};

// One finished iteration on one rank.
struct IterationReport {
  int rank = 0;
  int64_t iteration = 0;
  int64_t start_ns = 0;         // Host monotonic start of the iteration.
  int64_t end_ns = 0;           // Host monotonic end (after the optimizer step and loss sync).
  double iteration_time_s = 0;  // end - start, excluding pauses and directive application.
  double compute_s = 0;         // Time in forward/backward/optimizer (incl. injected slowdown).
  double loss = 0;              // Mean cross-entropy (nats/char) over the global batch.
  int64_t plan_version = 0;     // Plan in force during the iteration.
  int micro_batches = 0;        // Micro-batches this rank's DP group ran.
  int dp_index = 0;             // Position during the iteration.
  int pp_index = 0;
  double pause_s = 0;  // Time paused or applying directives before this iteration.
  // Blocks per stage of this rank's DP group's pipeline during the iteration (the S2L split in
  // force, common/layer_split.h; the even split unless a layer_split directive changed it).
  std::vector<int> stage_blocks;
};

class TrainerHooks {
 public:
  virtual ~TrainerHooks() = default;
  virtual void OnLayout(const RankContext& context) { (void)context; }
  virtual void OnIteration(const IterationReport& report) { (void)report; }
  virtual std::vector<falcon::v1::Directive> PollDirectives(int64_t iteration) {
    (void)iteration;
    return {};
  }
  virtual void Ack(const falcon::v1::Directive& directive, falcon::v1::AckStatus status,
                   const std::string& reason, int64_t applied_iteration) {
    (void)directive, (void)status, (void)reason, (void)applied_iteration;
  }
  virtual std::vector<falcon::v1::ValidationTask> PollValidationTasks(int64_t iteration) {
    (void)iteration;
    return {};
  }
  virtual void ReportValidation(const falcon::v1::ValidationResult& result) { (void)result; }
  virtual void RegisterValidationExecutor(directives::ValidationExecutor* executor) {
    (void)executor;
  }
};

// Standalone: reports nothing, never receives a directive.
class NoopHooks final : public TrainerHooks {};

}  // namespace falcon::trainer

#endif  // FALCON_TRAINER_HOOKS_H_
