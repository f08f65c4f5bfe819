#include "trainer/model/adam.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace falcon::trainer::model {

absl::Status AdamOptions::Validate() const {
  if (!(learning_rate > 0) || !std::isfinite(learning_rate)) {
    return absl::InvalidArgumentError(
        absl::StrCat("adam: learning_rate = ", learning_rate, " must be finite and > 0"));
  }
  if (!(beta1 >= 0 && beta1 < 1)) {
    return absl::InvalidArgumentError(absl::StrCat("adam: beta1 = ", beta1, " not in [0, 1)"));
  }
  if (!(beta2 >= 0 && beta2 < 1)) {
    return absl::InvalidArgumentError(absl::StrCat("adam: beta2 = ", beta2, " not in [0, 1)"));
  }
  if (!(epsilon > 0)) {
    return absl::InvalidArgumentError(absl::StrCat("adam: epsilon = ", epsilon, " must be > 0"));
  }
  return absl::OkStatus();
}

void AdamStep(const AdamOptions& o, int64_t step, int64_t n, float* params, const float* grads,
              float* m, float* v) {
  const double t = static_cast<double>(step);
  const float c1 = static_cast<float>(1.0 / (1.0 - std::pow(double{o.beta1}, t)));
  const float c2 = static_cast<float>(1.0 / (1.0 - std::pow(double{o.beta2}, t)));
  const float b1 = o.beta1, b2 = o.beta2, lr = o.learning_rate, eps = o.epsilon;
  for (int64_t i = 0; i < n; ++i) {
    const float g = grads[i];
    m[i] = b1 * m[i] + (1.0f - b1) * g;
    v[i] = b2 * v[i] + (1.0f - b2) * g * g;
    params[i] -= lr * (m[i] * c1) / (std::sqrt(v[i] * c2) + eps);
  }
}

}  // namespace falcon::trainer::model
