// Shape of the reference char-level language model and how its layers split into pipeline stages.
//
// The model (a Bengio-style MLP language model):
//   layer 0            embedding: the `context` previous characters -> table [vocab x embed_dim]
//                      -> concat [b x context*embed_dim] -> linear -> x0 [b x hidden]
//   layers 1..L        residual MLP blocks: x + relu(x W1 + b1) W2 + b2   (W1 [hidden x ffn])
//   layer L+1          softmax head: logits = x W + b [b x vocab], cross-entropy with the next char
// Activations between layers (and pipeline stages) are row-major [micro_batch_size x hidden].
//
// Plain data; thread-compatible.
#ifndef FALCON_TRAINER_MODEL_MODEL_CONFIG_H_
#define FALCON_TRAINER_MODEL_MODEL_CONFIG_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"

namespace falcon::trainer::model {

struct ModelConfig {
  int vocab_size = 0;          // Distinct characters of the corpus, >= 2.
  int context = 8;             // Characters of context per example, [1, 64].
  int embed_dim = 32;          // Embedding width per character, >= 1.
  int hidden = 128;            // Width of the residual stream, >= 1.
  int ffn = 256;               // Inner width of each MLP block, >= 1.
  int num_blocks = 4;          // L, the number of MLP blocks, >= 1.
  int micro_batch_size = 128;  // Examples per micro-batch, >= 1.

  // kInvalidArgument naming the field when out of range.
  absl::Status Validate() const;
  // Embedding + blocks + head.
  int num_layers() const { return num_blocks + 2; }
  // Floats in one activation (or activation gradient) message: micro_batch_size * hidden.
  int64_t activation_floats() const { return static_cast<int64_t>(micro_batch_size) * hidden; }
};

enum class LayerKind { kEmbedding, kBlock, kHead };

// Kind of layer `layer` in [0, num_layers()).
LayerKind KindOfLayer(const ModelConfig& config, int layer);
// Number of float parameters of `layer`.
int64_t LayerParamCount(const ModelConfig& config, int layer);

// Layers [first, end) of one pipeline stage.
struct StageLayers {
  int first = 0;
  int end = 0;
  bool Contains(int layer) const { return layer >= first && layer < end; }
};

// Layers of `stage` in a pipeline whose stage s holds stage_blocks[s] blocks (a
// common::StageBlocks, common/layer_split.h): the embedding goes to stage 0, the head to the last
// stage, and stage s gets blocks [sum_{t<s} stage_blocks[t], + stage_blocks[s]) (block b is layer
// b + 1). Requires every count >= 1, the counts summing to num_blocks and 0 <= stage <
// stage_blocks.size() (checked by common::ValidateLayerSplit).
StageLayers LayersOfStage(const ModelConfig& config, const std::vector<int>& stage_blocks,
                          int stage);

// The even case: `pp` stages, stage s gets blocks [s*L/pp, (s+1)*L/pp) (common::EvenStageBlocks).
// Requires 1 <= pp <= num_blocks and 0 <= stage < pp (checked by ValidateParallelConfig).
StageLayers LayersOfStage(const ModelConfig& config, int pp, int stage);

// Stage of `layer` in a pipeline of `pp` stages split evenly.
int StageOfLayer(const ModelConfig& config, int pp, int layer);

// Bytes of one block's training state: its parameters and both Adam moments, float32
// (3 * 4 * LayerParamCount of a block). What moving one block between stages (S2L) costs; the
// shim's hello reports it (ShimHello.block_state_bytes).
int64_t BlockStateBytes(const ModelConfig& config);

}  // namespace falcon::trainer::model

#endif  // FALCON_TRAINER_MODEL_MODEL_CONFIG_H_
