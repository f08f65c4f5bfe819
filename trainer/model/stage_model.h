// The part of the reference model one pipeline stage owns: a contiguous range of layers
// (model_config.h), their parameters, gradients and Adam moments, and the activations saved
// between the forward and the backward pass of every micro-batch in flight (at most PP under
// 1F1B).
//
// Every per-parameter buffer (params, grads, adam_m, adam_v) has the same flat layout: the stage's
// layers in order, each as in layers.h. LayerOffset() locates one layer, so DP all-reduce works on
// grads() directly and S3 remaps move layer slices.
//
// Not thread-safe: one thread drives a stage.
#ifndef FALCON_TRAINER_MODEL_STAGE_MODEL_H_
#define FALCON_TRAINER_MODEL_STAGE_MODEL_H_

#include <cstdint>
#include <map>
#include <vector>

#include "trainer/model/layers.h"
#include "trainer/model/model_config.h"

namespace falcon::trainer::model {

class StageModel {
 public:
  // Owns layers [layers.first, layers.end) of a model shaped by `config` (validated).
  StageModel(const ModelConfig& config, StageLayers layers);

  const ModelConfig& config() const { return config_; }
  StageLayers layers() const { return layers_; }
  bool has_embedding() const { return layers_.first == 0; }
  bool has_head() const { return layers_.end == config_.num_layers(); }

  int64_t num_params() const { return static_cast<int64_t>(params_.size()); }
  // Offset of `layer` (one of this stage's) in the flat buffers.
  int64_t LayerOffset(int layer) const { return offsets_[layer - layers_.first]; }
  int64_t LayerSize(int layer) const { return LayerParamCount(config_, layer); }

  float* params() { return params_.data(); }
  const float* params() const { return params_.data(); }
  float* grads() { return grads_.data(); }
  const float* grads() const { return grads_.data(); }
  float* adam_m() { return adam_m_.data(); }
  float* adam_v() { return adam_v_.data(); }
  const float* adam_m() const { return adam_m_.data(); }
  const float* adam_v() const { return adam_v_.data(); }

  // Sets every layer's initial parameters from `seed` (layers.h InitLayer) and zeroes the
  // gradients and Adam moments.
  void InitParams(uint64_t seed);
  void ZeroGrads();

  // Forward pass of micro-batch `micro` (any id unique among those in flight).
  //   first stage: `context_ids` [b x context] (copied); other stages: `input` [b x hidden];
  //   last stage: `targets` [b] and `loss_scale`, returns the summed cross-entropy (nats);
  //   other stages: writes `output` [b x hidden] and returns 0.
  double Forward(int64_t micro, const int32_t* context_ids, const float* input,
                 const int32_t* targets, float loss_scale, float* output);
  // Backward pass of an in-flight micro-batch: accumulates into grads() and frees its
  // activations. Non-last stages read `grad_output` [b x hidden]; non-first stages write
  // `grad_input` [b x hidden].
  void Backward(int64_t micro, const float* grad_output, float* grad_input);

  // Micro-batches whose Forward ran but not yet their Backward.
  int in_flight() const { return static_cast<int>(saved_.size()); }

 private:
  struct Saved {
    std::vector<int32_t> context_ids;
    Matrix concat;              // Embedding's concatenated input.
    std::vector<Matrix> input;  // Input of every block/head layer of the stage.
    std::vector<Matrix> pre;    // Pre-activation of every block.
    Matrix dlogits;             // Head gradient (last stage).
  };

  ModelConfig config_;
  StageLayers layers_;
  std::vector<int64_t> offsets_;
  std::vector<float> params_, grads_, adam_m_, adam_v_;
  std::map<int64_t, Saved> saved_;
};

}  // namespace falcon::trainer::model

#endif  // FALCON_TRAINER_MODEL_STAGE_MODEL_H_
