// ShimTrainerHooks: the reference trainer's TrainerHooks (trainer/hooks.h) over the real shim
// (falcon::trainer_shim::Shim), so a falcon_train rank reaches its node agent. Only the
// falcon_train binary links it; the trainer library never depends on the shim.
//
// What goes where:
//   hello (trainer_shim::Shim options)    job, rank, node, world, dp/pp sizes, M, epoch: from the
//   options at
//                           Create (the launcher's layout; an S3 remap is told to the agent
//                           through the re-registered DP/PP communicators, not the hello).
//   OnCommCreated (observer) every communicator (world, validation, DP, PP; rebuilt after S3) is
//                           registered with its kind, name and global member ranks.
//   OnOp (observer)         one op record per completed op (comm id, kind, bytes, peer, host
//                           times, iteration), for the agent's per-communicator busy/wait/transfer
//                           and the controller's link localization.
//   OnIteration             an iteration hint (start/end ns, loss, plan version).
//   PollDirectives / Ack    the shim runs with trainer_applies_directives: directives are
//                           screened by the shim and handed over once; the trainer agrees on them
//                           across ranks, applies them (pause and resume included) and acks;
//                           each outcome of an id reaches the agent once, and a re-delivered id is
//                           answered by the shim with the rank's last ack, never re-applied.
//   PollValidationTasks / ReportValidation   validation tasks while paused, and their results.
//
// Install it as the comm runtime's observer before the world communicator is created (the worker
// does so with WorkerOptions::observer), so the world's registration is not missed.
#ifndef FALCON_TRAINER_DIRECTIVES_SHIM_HOOKS_H_
#define FALCON_TRAINER_DIRECTIVES_SHIM_HOOKS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "collective/observer.h"
#include "trainer/hooks.h"
#include "trainer_shim/shim.h"

namespace falcon::trainer::directives {

struct ShimTrainerHooksOptions {
  std::string job;           // REQUIRES: a valid job name (trainer_shim::ShimOptions::job).
  std::string agent_socket;  // The agent's unix socket; REQUIRES: non-empty.
  std::string node;          // Node name in the hello (emulated node, e.g. "node3").
  int rank = 0;              // Global rank, [0, world_size).
  int world_size = 1;
  int local_rank = 0;  // Rank index inside its node, [0, world_size) (falconctl job's LOCAL).
  int dp_size = 0;     // Layout at start (0: unknown).
  int pp_size = 0;
  int global_micro_batches = 0;  // M (0: unknown).
  // The model's pipeline shape for S2L (trainer_shim::ShimOptions): its blocks (0: unknown, else
  // [max(pp_size, 1), 4096]) and the bytes of one block's training state (0: unknown).
  int pipeline_blocks = 0;
  uint64_t block_state_bytes = 0;
  uint64_t epoch = 0;  // Epoch the trainer starts at.
  // trainer_shim::Shim warnings (default: stderr).
  std::function<void(std::string_view)> log;
};

class ShimTrainerHooks final : public TrainerHooks, public collective::OpObserver {
 public:
  // Creates and connects the shim. kInvalidArgument naming the bad field
  // (trainer_shim::ShimOptions::Validate).
  static absl::StatusOr<std::unique_ptr<ShimTrainerHooks>> Create(ShimTrainerHooksOptions options);
  ~ShimTrainerHooks() override;  // Flushes and shuts the shim down.

  // TrainerHooks (the rank's training thread).
  void OnLayout(const RankContext& context) override;
  void OnIteration(const IterationReport& report) override;
  std::vector<falcon::v1::Directive> PollDirectives(int64_t iteration) override;
  void Ack(const falcon::v1::Directive& directive, falcon::v1::AckStatus status,
           const std::string& reason, int64_t applied_iteration) override;
  std::vector<falcon::v1::ValidationTask> PollValidationTasks(int64_t iteration) override;
  void ReportValidation(const falcon::v1::ValidationResult& result) override;

  // collective::OpObserver (any thread).
  void OnOp(const collective::OpEvent& event) noexcept override;
  void OnCommCreated(const collective::CommInfo& info) noexcept override;

  trainer_shim::Shim& shim() { return *shim_; }

 private:
  explicit ShimTrainerHooks(std::unique_ptr<trainer_shim::Shim> shim) : shim_(std::move(shim)) {}
  void Warn(std::string_view what, const absl::Status& status);

  std::unique_ptr<trainer_shim::Shim> shim_;
  collective::CommRuntime* runtime_ = nullptr;  // Seen in OnLayout; observer reset at exit.
};

}  // namespace falcon::trainer::directives

#endif  // FALCON_TRAINER_DIRECTIVES_SHIM_HOOKS_H_
