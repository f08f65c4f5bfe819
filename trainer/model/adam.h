// Adam (Kingma & Ba, 2015) with bias correction, applied in place over flat buffers.
// Thread-compatible.
#ifndef FALCON_TRAINER_MODEL_ADAM_H_
#define FALCON_TRAINER_MODEL_ADAM_H_

#include <cstdint>

#include "absl/status/status.h"

namespace falcon::trainer::model {

struct AdamOptions {
  float learning_rate = 2e-3f;  // > 0.
  float beta1 = 0.9f;           // [0, 1).
  float beta2 = 0.999f;         // [0, 1).
  float epsilon = 1e-8f;        // > 0.

  // kInvalidArgument naming the field.
  absl::Status Validate() const;
};

// One Adam update of `n` parameters at optimizer step `step` (1 for the first update):
//   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;  p -= lr * m/(1-b1^t) / (sqrt(v/(1-b2^t)) + eps).
void AdamStep(const AdamOptions& options, int64_t step, int64_t n, float* params,
              const float* grads, float* m, float* v);

}  // namespace falcon::trainer::model

#endif  // FALCON_TRAINER_MODEL_ADAM_H_
