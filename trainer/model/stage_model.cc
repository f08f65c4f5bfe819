#include "trainer/model/stage_model.h"

#include <algorithm>
#include <utility>

namespace falcon::trainer::model {

StageModel::StageModel(const ModelConfig& config, StageLayers layers)
    : config_(config), layers_(layers) {
  int64_t total = 0;
  for (int l = layers_.first; l < layers_.end; ++l) {
    offsets_.push_back(total);
    total += LayerParamCount(config_, l);
  }
  params_.assign(total, 0.0f);
  grads_.assign(total, 0.0f);
  adam_m_.assign(total, 0.0f);
  adam_v_.assign(total, 0.0f);
}

void StageModel::InitParams(uint64_t seed) {
  for (int l = layers_.first; l < layers_.end; ++l) {
    InitLayer(config_, l, seed, params_.data() + LayerOffset(l));
  }
  std::fill(grads_.begin(), grads_.end(), 0.0f);
  std::fill(adam_m_.begin(), adam_m_.end(), 0.0f);
  std::fill(adam_v_.begin(), adam_v_.end(), 0.0f);
}

void StageModel::ZeroGrads() { std::fill(grads_.begin(), grads_.end(), 0.0f); }

double StageModel::Forward(int64_t micro, const int32_t* context_ids, const float* input,
                           const int32_t* targets, float loss_scale, float* output) {
  const int b = config_.micro_batch_size;
  const int h = config_.hidden;
  Saved& s = saved_[micro];
  Matrix x;
  int first_dense = layers_.first;
  if (has_embedding()) {
    s.context_ids.assign(context_ids, context_ids + int64_t{b} * config_.context);
    EmbeddingForward(config_, params_.data(), s.context_ids.data(), &s.concat, &x);
    first_dense = 1;
  } else {
    x = Eigen::Map<const Matrix>(input, b, h);
  }
  double loss = 0;
  for (int l = first_dense; l < layers_.end; ++l) {
    const float* p = params_.data() + LayerOffset(l);
    if (KindOfLayer(config_, l) == LayerKind::kHead) {
      loss = HeadForward(config_, p, x, targets, loss_scale, &s.dlogits);
      s.input.push_back(std::move(x));
      return loss;
    }
    Matrix y;
    s.pre.emplace_back();
    BlockForward(config_, p, x, &s.pre.back(), &y);
    s.input.push_back(std::move(x));
    x = std::move(y);
  }
  Eigen::Map<Matrix>(output, b, h) = x;
  return 0;
}

void StageModel::Backward(int64_t micro, const float* grad_output, float* grad_input) {
  const int b = config_.micro_batch_size;
  const int h = config_.hidden;
  auto it = saved_.find(micro);
  Saved& s = it->second;
  Matrix dy;
  int layer = layers_.end - 1;
  int dense_index = static_cast<int>(s.input.size()) - 1;
  int block_index = static_cast<int>(s.pre.size()) - 1;
  const int first_dense = has_embedding() ? 1 : layers_.first;
  if (has_head()) {
    HeadBackward(config_, params_.data() + LayerOffset(layer), s.input[dense_index], s.dlogits,
                 grads_.data() + LayerOffset(layer), &dy);
    --layer;
    --dense_index;
  } else {
    dy = Eigen::Map<const Matrix>(grad_output, b, h);
  }
  for (; layer >= first_dense; --layer, --dense_index, --block_index) {
    Matrix dx;
    BlockBackward(config_, params_.data() + LayerOffset(layer), s.input[dense_index],
                  s.pre[block_index], dy, grads_.data() + LayerOffset(layer), &dx);
    dy = std::move(dx);
  }
  if (has_embedding()) {
    // dy is now the gradient of the embedding's output.
    EmbeddingBackward(config_, params_.data(), s.context_ids.data(), s.concat, dy, grads_.data());
  } else {
    Eigen::Map<Matrix>(grad_input, b, h) = dy;
  }
  saved_.erase(it);
}

}  // namespace falcon::trainer::model
