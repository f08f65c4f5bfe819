// One rank of the reference DP x PP trainer: its pipeline stage of the model, 1F1B over the
// micro-batches its DP group runs, PP point-to-point for activations and gradients, the DP
// gradient all-reduce per stage, Adam, and Falcon's directives applied at iteration boundaries
// (directives/directive_queue.h lists what is accepted):
//   S2  micro_batch_plan: DP group d runs the global micro-batches [offset_d, offset_d + m_d) of
//       the same global batch; every micro-batch's loss is scaled by 1/(M*b), so the summed (DP
//       all-reduce) gradient is the global-batch mean whatever the split (weighted aggregation).
//   S3  topology_change: pause, move parameters and Adam moments between ranks over the world
//       communicator through host buffers (directives/remap.h), rebuild the DP/PP communicators
//       (and the gradient groups of a split in force), resume; the pause time is reported (ack
//       reason, IterationReport.pause_s, JSON log).
//   S2L layer_split: each DP group's pipeline takes its own split of the model's blocks over its
//       stages (common/layer_split.h) and the micro-batch plan the directive carries; the blocks
//       a stage gains come, parameters and Adam moments bit for bit, from the stage of its own
//       pipeline that held them (directives/remap.h) over the world communicator; the pause time
//       is reported like S3's. While the splits differ, the gradients are summed per set of
//       layers whose DP replicas sit at the same stages, over a sub-communicator of those
//       replicas built with the split (directives/layer_split.h SplitGradientReducer). A
//       micro_batch_plan keeps the split; an S3 that keeps the shape keeps each DP index's split,
//       one that changes it starts even.
//   S4  checkpoint_restart: write a checkpoint (checkpoint/checkpoint.h), ack, and return
//       kCheckpointRestart; the launcher restarts the job without the excluded ranks and resumes
//       from it.
//   pause / resume: stop at the boundary; run the agreed validation tasks
//       (directives/validation_executor.h) until resumed or the pause's max duration passes.
// Every rank agrees on the directives and the loss at each boundary (directives/directive_sync.h),
// so all apply a directive at the same iteration.
//
// Deterministic given the seed: data (model/corpus.h) and initialization depend only on the seed,
// iteration and global micro-batch index, never on the layout.
//
// Not thread-safe: Run() on the rank's main thread. The validation executor it registers with the
// hooks may be called from another thread (directives/validation_executor.h).
#ifndef FALCON_TRAINER_RANK_TRAINER_H_
#define FALCON_TRAINER_RANK_TRAINER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "analysis/plan/layout.h"
#include "collective/comm_runtime.h"
#include "collective/communicator.h"
#include "collective/fault/rank_faults.h"
#include "common/clock.h"
#include "common/layer_split.h"
#include "trainer/device/emulated_device.h"
#include "trainer/directives/directive_queue.h"
#include "trainer/directives/layer_split.h"
#include "trainer/directives/micro_batch_plan.h"
#include "trainer/directives/validation_executor.h"
#include "trainer/hooks.h"
#include "trainer/model/adam.h"
#include "trainer/model/corpus.h"
#include "trainer/model/model_config.h"
#include "trainer/model/stage_model.h"

namespace falcon::trainer {

struct TrainerOptions {
  model::ModelConfig model;  // vocab_size must match the corpus.
  model::AdamOptions adam;
  int dp = 1;             // DP groups; dp * pp == world size.
  int pp = 1;             // Pipeline stages.
  int micro_batches = 1;  // M per global batch; a multiple of pp.
  int64_t steps = 100;    // Stop once this many iterations (counted from 0) are done.
  uint64_t seed = 1;
  // Final checkpoint at the end of the run when non-empty; relative S4 checkpoint dirs resolve
  // against it.
  std::string checkpoint_dir;
  std::string resume_dir;     // Resume from this checkpoint when non-empty.
  std::string json_log_path;  // One JSON line per iteration when non-empty.
  // S4: global rank 0 writes {"checkpoint_dir", "excluded_ranks", "iteration", "epoch" (the
  // directive's job epoch, which the restarted ranks run at)} here before returning
  // kCheckpointRestart, for the launcher. Empty: not written.
  std::string restart_file;
  absl::Duration poll_interval = absl::Milliseconds(5);  // Directive polling while paused.
  // How long validation tasks wait for the rest of their validation before running without it
  // (a task lost with a dead agent), in poll_interval steps.
  absl::Duration task_set_wait = absl::Seconds(1);
  // Emulated device time per micro-batch forward on a stage of the average size, num_blocks /
  // pp blocks (backward: twice it), run after the real compute on the rank's emulated accelerator
  // (trainer/device/emulated_device.h: its clock asks for duty of a core and runs device time at
  // the share of that it gets), so iteration times are stable on a few noisy cores yet follow
  // the CPU the OS gives the rank. A stage holding k blocks runs it times k / (num_blocks / pp)
  // (directives::EmulatedStageTime): unchanged on an even split of blocks divisible by pp, half
  // on a stage left with half the blocks (S2L). An in-process test fault's factor stretches it
  // too. Zero (default): none.
  absl::Duration emulated_compute = absl::ZeroDuration();
  // The emulated accelerator (duty, tick, rate window).
  device::EmulatedDeviceOptions emulated_device;
  // Emulated wire time of one validation link-pass message, slept by its sender (not stretched
  // by faults: a link fault slows the real transfer). Unset: 10 x emulated_compute.
  std::optional<absl::Duration> emulated_link;
  // Emulated device time of one validation GEMM repetition (on the emulated accelerator, like
  // emulated_compute). Unset: 10 x emulated_compute.
  std::optional<absl::Duration> emulated_gemm;
};

// Exit status of a rank process after an S4 checkpoint_restart directive (EX_TEMPFAIL: the
// launcher restarts the job from the checkpoint).
inline constexpr int kExitCheckpointRestart = 75;

struct RunResult {
  enum class Outcome { kCompleted, kCheckpointRestart };
  Outcome outcome = Outcome::kCompleted;
  int64_t iteration = 0;            // Next iteration that would run.
  double last_loss = 0;             // Mean loss of the last finished iteration.
  std::string checkpoint_dir;       // kCheckpointRestart: where the checkpoint is.
  std::vector<int> excluded_ranks;  // kCheckpointRestart: ranks to leave out.
};

class RankTrainer {
 public:
  // Creates the validation, DP and PP communicators (collective over `world`), initializes or
  // resumes the model. `world` must span every rank in global-rank order. Corpus, runtime,
  // hooks, faults (may be null: none; its compute slowdown stretches every compute phase, its
  // contention follows the iteration) and clock must outlive the trainer. kInvalidArgument for a
  // bad configuration (naming the flag); checkpoint and communicator errors pass through.
  static absl::StatusOr<std::unique_ptr<RankTrainer>> Create(
      TrainerOptions options, const model::Corpus* corpus,
      std::shared_ptr<collective::CommRuntime> runtime,
      std::unique_ptr<collective::Communicator> world, TrainerHooks* hooks,
      collective::fault::RankFaults* faults, const common::Clock* clock);

  // Trains until `steps` iterations are done (then writes the final checkpoint if asked) or an
  // S4 directive is applied. Communicator, checkpoint and log errors pass through.
  absl::StatusOr<RunResult> Run();

  int rank() const { return rank_; }
  const analysis::plan::Layout& layout() const { return layout_; }
  const model::StageModel& stage() const { return *stage_; }
  const std::vector<int>& micro_batch_plan() const { return plan_; }
  // Blocks per stage of every DP group's pipeline in force (by DP index; even at start).
  const std::vector<common::StageBlocks>& layer_split() const { return splits_; }
  int64_t plan_version() const { return plan_version_; }

 private:
  struct BoundaryOutcome {
    double loss_sum = 0;    // Agreed loss of the iteration before the boundary.
    int64_t agreed_ns = 0;  // When the first agreement finished.
    int64_t end_ns = 0;     // When the boundary finished (next iteration starts).
    bool restart = false;   // An S4 directive was applied.
  };

  RankTrainer(TrainerOptions options, const model::Corpus* corpus,
              std::shared_ptr<collective::CommRuntime> runtime,
              std::unique_ptr<collective::Communicator> world, TrainerHooks* hooks,
              collective::fault::RankFaults* faults, const common::Clock* clock,
              analysis::plan::Layout layout);

  absl::Status Init();
  // Collective over the world: the DP and PP communicators of layout_ and BuildGradientReducer.
  absl::Status BuildGroupComms();
  // Collective over the world: grad_reducer_ for splits_ and layout_.
  absl::Status BuildGradientReducer();
  RankContext Context() const;
  absl::Status RunIteration(int64_t iteration, double* loss_sum, double* compute_s);
  // Agrees (carrying `loss_sum` of the iteration before), calls `report` with the agreed loss
  // right after the first agreement, then applies due directives (looping while paused).
  absl::StatusOr<BoundaryOutcome> Boundary(
      int64_t iteration, double loss_sum,
      const std::function<absl::Status(double loss_sum, int64_t agreed_ns)>& report);
  // Applies one due directive at `iteration`; sets *restart for S4.
  // While paused: adds the agreed tasks to pending_tasks_ and runs them once their validation is
  // whole (or waited long enough), in task_id order round by round.
  absl::Status RunValidationTasks(const std::vector<falcon::v1::ValidationTask>& agreed);
  // Answers every held task this rank takes part in with an error ("not run: `why` ...") and
  // forgets them: nothing the controller sent goes unanswered.
  void DropPendingTasks(const std::string& why);
  // Whether this rank answers `task`: a participant, or rank 0 for a task naming no rank.
  bool Answers(const falcon::v1::ValidationTask& task) const;
  absl::Status Apply(const falcon::v1::Directive& d, int64_t iteration, bool* restart);
  absl::Status ApplyTopology(const falcon::v1::Directive& d, std::string* reason);
  // S2L at `iteration`: moves the blocks the new split gives each stage, takes its micro-batch
  // plan.
  absl::Status ApplyLayerSplit(const falcon::v1::Directive& d, int64_t iteration,
                               std::string* reason);
  // Collective: layer files from DP group 0, manifest (and, for an S4 `restart`, the launcher's
  // restart request) from rank 0, between barriers.
  absl::Status WriteCheckpoint(const std::string& dir, int64_t iteration,
                               const std::vector<int>& excluded, bool restart);
  void Ack(const falcon::v1::Directive& d, falcon::v1::AckStatus status, const std::string& reason,
           int64_t applied_iteration);
  absl::Status LogIteration(const IterationReport& report) const;

  TrainerOptions options_;
  const model::Corpus* corpus_;
  std::shared_ptr<collective::CommRuntime> runtime_;
  std::unique_ptr<collective::Communicator> world_;
  std::unique_ptr<collective::Communicator> validation_comm_;
  std::unique_ptr<collective::Communicator> dp_comm_;
  std::unique_ptr<collective::Communicator> pp_comm_;
  TrainerHooks* hooks_;
  collective::fault::RankFaults* faults_;  // May be null.
  device::EmulatedDevice device_;
  const common::Clock* clock_;
  std::unique_ptr<directives::ValidationExecutor> executor_;
  const int rank_;

  analysis::plan::Layout layout_;
  std::vector<int> plan_;
  // Blocks per stage of each DP group's pipeline (by DP index); this rank holds the layers of
  // LayersOfStage(splits_[its dp], its pp).
  std::vector<common::StageBlocks> splits_;
  int64_t plan_version_ = 0;
  int64_t start_iteration_ = 0;
  std::unique_ptr<model::StageModel> stage_;
  // The DP gradient all-reduce for splits_ and layout_ (over dp_comm_ while every pipeline is
  // split alike, else over its own sub-communicators); rebuilt with them.
  std::unique_ptr<directives::SplitGradientReducer> grad_reducer_;
  directives::DirectiveQueue queue_;
  bool paused_ = false;
  // Validation tasks run during the current pause (by task_id).
  absl::flat_hash_set<uint64_t> tasks_run_;
  // Validation tasks agreed but not yet run, by task_id: held until the whole validation is in
  // (ValidationTask.validation_tasks) or task_set_wait_polls boundary polls have passed, so its
  // rounds run whole even when the agents deliver the tasks at different polls (every rank sees
  // the same agreed lists at the same polls, so all decide alike).
  std::map<uint64_t, falcon::v1::ValidationTask> pending_tasks_;
  int pending_task_polls_ = 0;
  int64_t pause_deadline_ns_ = 0;
  double last_loss_ = 0;
  std::string restart_dir_;
  std::vector<int> restart_excluded_;
  uint64_t restart_epoch_ = 0;  // The S4 directive's epoch.
  // Reusable point-to-point buffers, [b x hidden] each.
  std::vector<float> act_in_, act_out_, grad_in_, grad_out_;
  std::vector<int32_t> context_ids_, targets_;
};

}  // namespace falcon::trainer

#endif  // FALCON_TRAINER_RANK_TRAINER_H_
