#include "trainer/model/stage_model.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "trainer/model/adam.h"
#include "trainer/model/corpus.h"

namespace falcon::trainer::model {
namespace {

ModelConfig TinyConfig() {
  ModelConfig c;
  c.vocab_size = 7;
  c.context = 3;
  c.embed_dim = 4;
  c.hidden = 6;
  c.ffn = 8;
  c.num_blocks = 3;
  c.micro_batch_size = 5;
  return c;
}

struct Batch {
  std::vector<int32_t> ctx, tgt;
};

Batch MakeBatch(const ModelConfig& c, int salt) {
  Batch b;
  for (int i = 0; i < c.micro_batch_size * c.context; ++i) {
    b.ctx.push_back((i * 3 + salt) % c.vocab_size);
  }
  for (int i = 0; i < c.micro_batch_size; ++i) b.tgt.push_back((i * 5 + salt + 1) % c.vocab_size);
  return b;
}

double LossOf(StageModel& m, const Batch& b) {
  const double loss = m.Forward(0, b.ctx.data(), nullptr, b.tgt.data(), 1.0f, nullptr);
  std::vector<float> unused;
  m.Backward(0, nullptr, nullptr);  // Frees the saved activations.
  return loss;
}

TEST(StageModelTest, GradientsMatchFiniteDifferences) {
  const ModelConfig c = TinyConfig();
  ASSERT_TRUE(c.Validate().ok());
  StageModel m(c, StageLayers{0, c.num_layers()});
  m.InitParams(11);
  const Batch b = MakeBatch(c, 2);
  m.ZeroGrads();
  m.Forward(0, b.ctx.data(), nullptr, b.tgt.data(), 1.0f, nullptr);
  m.Backward(0, nullptr, nullptr);
  const std::vector<float> analytic(m.grads(), m.grads() + m.num_params());
  // Every layer is probed at a few parameters, biases included.
  int checked = 0;
  for (int64_t i = 0; i < m.num_params(); i += 7) {
    const float saved = m.params()[i];
    const float eps = 1e-2f;
    m.params()[i] = saved + eps;
    const double up = LossOf(m, b);
    m.params()[i] = saved - eps;
    const double down = LossOf(m, b);
    m.params()[i] = saved;
    const double numeric = (up - down) / (2 * eps);
    EXPECT_NEAR(analytic[i], numeric, 2e-3 + 2e-2 * std::abs(numeric)) << "param " << i;
    ++checked;
  }
  EXPECT_GT(checked, 40);
}

TEST(StageModelTest, TwoStagesComputeWhatOneStageComputes) {
  const ModelConfig c = TinyConfig();
  StageModel whole(c, LayersOfStage(c, 1, 0));
  StageModel s0(c, LayersOfStage(c, 2, 0));
  StageModel s1(c, LayersOfStage(c, 2, 1));
  EXPECT_TRUE(s0.has_embedding());
  EXPECT_FALSE(s0.has_head());
  EXPECT_TRUE(s1.has_head());
  EXPECT_EQ(s0.num_params() + s1.num_params(), whole.num_params());
  whole.InitParams(3);
  s0.InitParams(3);
  s1.InitParams(3);
  for (int micro = 0; micro < 2; ++micro) {
    const Batch b = MakeBatch(c, micro);
    const double l_whole = whole.Forward(micro, b.ctx.data(), nullptr, b.tgt.data(), 0.5f, nullptr);
    std::vector<float> act(c.activation_floats()), grad(c.activation_floats());
    s0.Forward(micro, b.ctx.data(), nullptr, nullptr, 0, act.data());
    const double l_split = s1.Forward(micro, nullptr, act.data(), b.tgt.data(), 0.5f, nullptr);
    EXPECT_DOUBLE_EQ(l_whole, l_split);
    whole.Backward(micro, nullptr, nullptr);
    s1.Backward(micro, nullptr, grad.data());
    s0.Backward(micro, grad.data(), nullptr);
  }
  EXPECT_EQ(whole.in_flight(), 0);
  for (int l = 0; l < c.num_layers(); ++l) {
    StageModel& part = s0.layers().Contains(l) ? s0 : s1;
    for (int64_t i = 0; i < whole.LayerSize(l); ++i) {
      ASSERT_EQ(whole.params()[whole.LayerOffset(l) + i], part.params()[part.LayerOffset(l) + i]);
      ASSERT_NEAR(whole.grads()[whole.LayerOffset(l) + i], part.grads()[part.LayerOffset(l) + i],
                  1e-6)
          << "layer " << l << " param " << i;
    }
  }
}

TEST(StageModelTest, AdamLowersTheLossOnRealText) {
  absl::StatusOr<Corpus> corpus = Corpus::Load(kDefaultCorpusPath);
  ASSERT_TRUE(corpus.ok()) << corpus.status();
  ModelConfig c;
  c.vocab_size = corpus->vocab_size();
  c.hidden = 64;
  c.ffn = 128;
  c.num_blocks = 2;
  c.micro_batch_size = 32;
  StageModel m(c, LayersOfStage(c, 1, 0));
  m.InitParams(1);
  AdamOptions adam;
  std::vector<int32_t> ctx(c.micro_batch_size * c.context), tgt(c.micro_batch_size);
  double first = 0, last = 0;
  for (int step = 0; step < 150; ++step) {
    m.ZeroGrads();
    corpus->FillMicroBatch(5, step, 0, c.micro_batch_size, c.context, ctx.data(), tgt.data());
    const double loss =
        m.Forward(0, ctx.data(), nullptr, tgt.data(), 1.0f / c.micro_batch_size, nullptr) /
        c.micro_batch_size;
    m.Backward(0, nullptr, nullptr);
    AdamStep(adam, step + 1, m.num_params(), m.params(), m.grads(), m.adam_m(), m.adam_v());
    if (step < 10) first += loss / 10;
    if (step >= 140) last += loss / 10;
  }
  EXPECT_NEAR(first, std::log(c.vocab_size), 0.6);
  EXPECT_LT(last, first - 1.0) << "first " << first << " last " << last;
}

}  // namespace
}  // namespace falcon::trainer::model
