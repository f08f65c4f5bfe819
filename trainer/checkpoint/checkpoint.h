// On-disk checkpoints for S4 (checkpoint and restart on healthy ranks,
// docs/algorithms.md#s4-checkpoint-and-restart) and for the end of a run. Layout-independent: state
// is stored per layer, so a job can resume on any DP x PP layout (fewer ranks after an S4 restart
// included).
//
//   DIR/manifest.json     written last (temp file + rename) by global rank 0: iteration to resume
//                         at, plan version, seed, model shape, layout, micro-batch plan, the
//                         layer split in force (S2L), excluded ranks and the mean loss of the
//                         last iteration.
//   DIR/layer_<L>.bin     "FLCNCKP1", int32 layer, int64 n, then n floats each of parameters,
//                         Adam m and Adam v; written by the DP-group-0 holder of the layer.
//
// Thread-compatible; different ranks write different files.
#ifndef FALCON_TRAINER_CHECKPOINT_CHECKPOINT_H_
#define FALCON_TRAINER_CHECKPOINT_CHECKPOINT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "trainer/model/model_config.h"

namespace falcon::trainer::checkpoint {

struct CheckpointManifest {
  int64_t iteration = 0;  // Next iteration to run; the optimizer has taken this many steps.
  int64_t plan_version = 0;
  uint64_t seed = 0;
  model::ModelConfig model;
  int world = 1;  // Layout the checkpoint was taken in.
  int dp = 1;
  int pp = 1;
  int micro_batches = 1;  // M, micro-batches per global batch.
  std::vector<int> micro_batch_plan;
  // Blocks per stage of each DP group's pipeline in force (by DP index, common/layer_split.h):
  // dp entries of pp counts >= 1 summing to model.num_blocks. Empty: every pipeline even (also
  // what a manifest written before S2L reads as). The layer files do not depend on it.
  std::vector<std::vector<int>> layer_split;
  std::vector<int> excluded_ranks;  // From the S4 directive, in the old rank numbering.
  double last_loss = 0;
};

// kUnavailable naming the path on I/O errors.
absl::Status WriteManifest(const std::string& dir, const CheckpointManifest& manifest);
// kNotFound when DIR/manifest.json is missing; kDataLoss when it does not parse or its
// layer_split does not fit its dp, pp and model.num_blocks.
absl::StatusOr<CheckpointManifest> ReadManifest(const std::string& dir);

// Writes layer `layer`: n values each from params, adam_m, adam_v. Creates `dir` if needed.
absl::Status WriteLayer(const std::string& dir, int layer, int64_t n, const float* params,
                        const float* adam_m, const float* adam_v);
// Reads layer `layer` into the three arrays of n floats. kNotFound when missing; kDataLoss when
// the header does not match (wrong layer or size: a checkpoint of another model).
absl::Status ReadLayer(const std::string& dir, int layer, int64_t n, float* params, float* adam_m,
                       float* adam_v);

// Creates `dir` and its parents. kUnavailable naming the path.
absl::Status MakeDirs(const std::string& dir);

}  // namespace falcon::trainer::checkpoint

#endif  // FALCON_TRAINER_CHECKPOINT_CHECKPOINT_H_
