#include "trainer/model/model_config.h"

#include "absl/strings/str_cat.h"
#include "common/layer_split.h"

namespace falcon::trainer::model {
namespace {

absl::Status Range(const char* field, int value, int lo, int hi) {
  if (value < lo || value > hi) {
    return absl::InvalidArgumentError(
        absl::StrCat("model config: ", field, " = ", value, " is outside [", lo, ", ", hi, "]"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ModelConfig::Validate() const {
  constexpr int kBig = 1 << 16;
  for (absl::Status s :
       {Range("vocab_size", vocab_size, 2, 256), Range("context", context, 1, 64),
        Range("embed_dim", embed_dim, 1, kBig), Range("hidden", hidden, 1, kBig),
        Range("ffn", ffn, 1, kBig), Range("num_blocks (--layers)", num_blocks, 1, 1024),
        Range("micro_batch_size", micro_batch_size, 1, kBig)}) {
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

LayerKind KindOfLayer(const ModelConfig& config, int layer) {
  if (layer == 0) return LayerKind::kEmbedding;
  if (layer == config.num_layers() - 1) return LayerKind::kHead;
  return LayerKind::kBlock;
}

int64_t LayerParamCount(const ModelConfig& c, int layer) {
  switch (KindOfLayer(c, layer)) {
    case LayerKind::kEmbedding:
      return int64_t{c.vocab_size} * c.embed_dim + int64_t{c.context} * c.embed_dim * c.hidden +
             c.hidden;
    case LayerKind::kBlock:
      return 2 * int64_t{c.hidden} * c.ffn + c.ffn + c.hidden;
    case LayerKind::kHead:
      return int64_t{c.hidden} * c.vocab_size + c.vocab_size;
  }
  return 0;
}

StageLayers LayersOfStage(const ModelConfig& config, const std::vector<int>& stage_blocks,
                          int stage) {
  int first_block = 0;
  for (int s = 0; s < stage; ++s) first_block += stage_blocks[s];
  StageLayers out;
  out.first = stage == 0 ? 0 : 1 + first_block;
  out.end = stage == static_cast<int>(stage_blocks.size()) - 1
                ? config.num_layers()
                : 1 + first_block + stage_blocks[stage];
  return out;
}

StageLayers LayersOfStage(const ModelConfig& config, int pp, int stage) {
  return LayersOfStage(config, common::EvenStageBlocks(config.num_blocks, pp), stage);
}

int StageOfLayer(const ModelConfig& config, int pp, int layer) {
  for (int s = 0; s < pp; ++s) {
    if (LayersOfStage(config, pp, s).Contains(layer)) return s;
  }
  return -1;
}

int64_t BlockStateBytes(const ModelConfig& config) { return 3 * 4 * LayerParamCount(config, 1); }

}  // namespace falcon::trainer::model
