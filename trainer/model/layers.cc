#include "trainer/model/layers.h"

#include <cmath>

#include "trainer/model/corpus.h"

namespace falcon::trainer::model {
namespace {

using MapM = Eigen::Map<Matrix>;
using CMapM = Eigen::Map<const Matrix>;
using RowVec = Eigen::Matrix<float, 1, Eigen::Dynamic>;
using MapV = Eigen::Map<RowVec>;
using CMapV = Eigen::Map<const RowVec>;

// Uniform in [-scale, scale), from a counter-based hash.
void FillUniform(uint64_t seed, float scale, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t bits = HashCombine(seed, static_cast<uint64_t>(i)) >> 40;  // 24 bits
    const float u = static_cast<float>(bits) / static_cast<float>(1 << 24);   // [0, 1)
    out[i] = (2.0f * u - 1.0f) * scale;
  }
}

// Uniform with the standard deviation of N(0, 1/fan_in) times `gain`.
float FanInScale(int64_t fan_in, float gain) {
  return gain * std::sqrt(3.0f / static_cast<float>(fan_in));
}

}  // namespace

void InitLayer(const ModelConfig& c, int layer, uint64_t seed, float* p) {
  const uint64_t s = HashCombine(seed, 0x1a7e0000ULL + static_cast<uint64_t>(layer));
  switch (KindOfLayer(c, layer)) {
    case LayerKind::kEmbedding: {
      const int64_t table = int64_t{c.vocab_size} * c.embed_dim;
      const int64_t in = int64_t{c.context} * c.embed_dim;
      FillUniform(HashCombine(s, 1), std::sqrt(3.0f), p, table);
      FillUniform(HashCombine(s, 2), FanInScale(in, 1.0f), p + table, in * c.hidden);
      std::fill_n(p + table + in * c.hidden, c.hidden, 0.0f);
      break;
    }
    case LayerKind::kBlock: {
      const int64_t w1 = int64_t{c.hidden} * c.ffn;
      FillUniform(HashCombine(s, 1), FanInScale(c.hidden, std::sqrt(2.0f)), p, w1);
      std::fill_n(p + w1, c.ffn, 0.0f);
      // Residual branches start small so the stream stays O(1) however deep the model is.
      const float gain = 1.0f / std::sqrt(static_cast<float>(2 * c.num_blocks));
      FillUniform(HashCombine(s, 2), FanInScale(c.ffn, gain), p + w1 + c.ffn, w1);
      std::fill_n(p + 2 * w1 + c.ffn, c.hidden, 0.0f);
      break;
    }
    case LayerKind::kHead: {
      const int64_t w = int64_t{c.hidden} * c.vocab_size;
      FillUniform(HashCombine(s, 1), FanInScale(c.hidden, 1.0f), p, w);
      std::fill_n(p + w, c.vocab_size, 0.0f);
      break;
    }
  }
}

void EmbeddingForward(const ModelConfig& c, const float* params, const int32_t* ids, Matrix* concat,
                      Matrix* out) {
  const int b = c.micro_batch_size;
  const int e = c.embed_dim;
  const int64_t table = int64_t{c.vocab_size} * e;
  const int64_t in = int64_t{c.context} * e;
  concat->resize(b, in);
  for (int r = 0; r < b; ++r) {
    for (int j = 0; j < c.context; ++j) {
      const float* row = params + int64_t{ids[r * c.context + j]} * e;
      std::copy_n(row, e, concat->data() + r * in + j * e);
    }
  }
  CMapM w_in(params + table, in, c.hidden);
  CMapV b_in(params + table + in * c.hidden, c.hidden);
  out->noalias() = *concat * w_in;
  out->rowwise() += b_in;
}

void EmbeddingBackward(const ModelConfig& c, const float* params, const int32_t* ids,
                       const Matrix& concat, const Matrix& dout, float* grads) {
  const int b = c.micro_batch_size;
  const int e = c.embed_dim;
  const int64_t table = int64_t{c.vocab_size} * e;
  const int64_t in = int64_t{c.context} * e;
  CMapM w_in(params + table, in, c.hidden);
  MapM dw_in(grads + table, in, c.hidden);
  MapV db_in(grads + table + in * c.hidden, c.hidden);
  dw_in.noalias() += concat.transpose() * dout;
  db_in += dout.colwise().sum();
  Matrix dconcat = dout * w_in.transpose();
  for (int r = 0; r < b; ++r) {
    for (int j = 0; j < c.context; ++j) {
      float* g = grads + int64_t{ids[r * c.context + j]} * e;
      const float* d = dconcat.data() + r * in + j * e;
      for (int k = 0; k < e; ++k) g[k] += d[k];
    }
  }
}

void BlockForward(const ModelConfig& c, const float* params, const Matrix& x, Matrix* pre,
                  Matrix* y) {
  const int64_t w1n = int64_t{c.hidden} * c.ffn;
  CMapM w1(params, c.hidden, c.ffn);
  CMapV b1(params + w1n, c.ffn);
  CMapM w2(params + w1n + c.ffn, c.ffn, c.hidden);
  CMapV b2(params + 2 * w1n + c.ffn, c.hidden);
  pre->noalias() = x * w1;
  pre->rowwise() += b1;
  *y = x;
  y->noalias() += pre->cwiseMax(0.0f) * w2;
  y->rowwise() += b2;
}

void BlockBackward(const ModelConfig& c, const float* params, const Matrix& x, const Matrix& pre,
                   const Matrix& dy, float* grads, Matrix* dx) {
  const int64_t w1n = int64_t{c.hidden} * c.ffn;
  CMapM w1(params, c.hidden, c.ffn);
  CMapM w2(params + w1n + c.ffn, c.ffn, c.hidden);
  MapM dw1(grads, c.hidden, c.ffn);
  MapV db1(grads + w1n, c.ffn);
  MapM dw2(grads + w1n + c.ffn, c.ffn, c.hidden);
  MapV db2(grads + 2 * w1n + c.ffn, c.hidden);
  const Matrix h = pre.cwiseMax(0.0f);
  dw2.noalias() += h.transpose() * dy;
  db2 += dy.colwise().sum();
  Matrix da = dy * w2.transpose();
  da = (pre.array() > 0.0f).select(da, 0.0f);
  dw1.noalias() += x.transpose() * da;
  db1 += da.colwise().sum();
  if (dx != nullptr) {
    *dx = dy;
    dx->noalias() += da * w1.transpose();
  }
}

double HeadForward(const ModelConfig& c, const float* params, const Matrix& x,
                   const int32_t* targets, float loss_scale, Matrix* dlogits) {
  const int64_t wn = int64_t{c.hidden} * c.vocab_size;
  CMapM w(params, c.hidden, c.vocab_size);
  CMapV bias(params + wn, c.vocab_size);
  Matrix& logits = *dlogits;  // Reused in place: logits -> probabilities -> gradient.
  logits.noalias() = x * w;
  logits.rowwise() += bias;
  double loss = 0;
  for (int r = 0; r < logits.rows(); ++r) {
    auto row = logits.row(r);
    const float max = row.maxCoeff();
    row.array() = (row.array() - max).exp();
    const float sum = row.sum();
    row /= sum;
    const float p = std::max(row(targets[r]), 1e-30f);
    loss -= std::log(static_cast<double>(p));
    row(targets[r]) -= 1.0f;
  }
  logits *= loss_scale;
  return loss;
}

void HeadBackward(const ModelConfig& c, const float* params, const Matrix& x, const Matrix& dlogits,
                  float* grads, Matrix* dx) {
  const int64_t wn = int64_t{c.hidden} * c.vocab_size;
  CMapM w(params, c.hidden, c.vocab_size);
  MapM dw(grads, c.hidden, c.vocab_size);
  MapV db(grads + wn, c.vocab_size);
  dw.noalias() += x.transpose() * dlogits;
  db += dlogits.colwise().sum();
  if (dx != nullptr) dx->noalias() = dlogits * w.transpose();
}

}  // namespace falcon::trainer::model
