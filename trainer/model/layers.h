// Forward and backward passes of the three layer kinds of the reference model (model_config.h),
// on CPU with Eigen. Parameters and gradients are flat float arrays laid out per layer:
//   embedding  table [vocab x embed] | w_in [context*embed x hidden] | b_in [hidden]
//   block      w1 [hidden x ffn] | b1 [ffn] | w2 [ffn x hidden] | b2 [hidden]
//   head       w [hidden x vocab] | b [vocab]
// (all matrices row-major). Backward passes accumulate (+=) into the gradient arrays.
//
// Stateless functions; thread-compatible (callers own every buffer).
#ifndef FALCON_TRAINER_MODEL_LAYERS_H_
#define FALCON_TRAINER_MODEL_LAYERS_H_

#include <cstdint>
#include <eigen3/Eigen/Core>

#include "trainer/model/model_config.h"

namespace falcon::trainer::model {

using Matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// Writes the initial parameters of `layer` (uniform, fan-in scaled; biases 0), determined by
// (seed, layer) only, so every layout starts from the same model.
void InitLayer(const ModelConfig& config, int layer, uint64_t seed, float* params);

// --- Embedding (layer 0) ---
// context_ids: row-major [b x context]. Saves the concatenated embeddings in `concat`
// [b x context*embed]; writes `out` [b x hidden].
void EmbeddingForward(const ModelConfig& c, const float* params, const int32_t* context_ids,
                      Matrix* concat, Matrix* out);
void EmbeddingBackward(const ModelConfig& c, const float* params, const int32_t* context_ids,
                       const Matrix& concat, const Matrix& dout, float* grads);

// --- Residual MLP block ---
// Saves the pre-activation `pre` [b x ffn]; writes y [b x hidden]. x and y may not alias.
void BlockForward(const ModelConfig& c, const float* params, const Matrix& x, Matrix* pre,
                  Matrix* y);
// dx may be null (not needed). x and pre are the forward's input and saved pre-activation.
void BlockBackward(const ModelConfig& c, const float* params, const Matrix& x, const Matrix& pre,
                   const Matrix& dy, float* grads, Matrix* dx);

// --- Softmax head with cross-entropy ---
// Returns the summed cross-entropy (nats) over the b rows and writes dlogits =
// loss_scale * (softmax - onehot(target)) [b x vocab] for the backward pass.
double HeadForward(const ModelConfig& c, const float* params, const Matrix& x,
                   const int32_t* targets, float loss_scale, Matrix* dlogits);
void HeadBackward(const ModelConfig& c, const float* params, const Matrix& x, const Matrix& dlogits,
                  float* grads, Matrix* dx);

}  // namespace falcon::trainer::model

#endif  // FALCON_TRAINER_MODEL_LAYERS_H_
