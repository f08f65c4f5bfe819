#include "common/layer_split.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace falcon::common {

StageBlocks EvenStageBlocks(int blocks, int stages) {
  StageBlocks out;
  if (stages < 1 || blocks < stages) return out;
  out.reserve(stages);
  for (int s = 0; s < stages; ++s) {
    out.push_back(
        static_cast<int>((int64_t{s} + 1) * blocks / stages - int64_t{s} * blocks / stages));
  }
  return out;
}

absl::Status ValidatePipelineShape(int64_t pipeline_blocks, uint64_t block_state_bytes,
                                   int64_t pp_size, absl::string_view field_prefix) {
  const int64_t least = std::max<int64_t>(pp_size, 1);
  if (pipeline_blocks != 0 && (pipeline_blocks < least || pipeline_blocks > kMaxPipelineBlocks)) {
    return absl::InvalidArgumentError(absl::StrCat(
        field_prefix, "pipeline_blocks: ", pipeline_blocks, " is not 0 (unknown) or in [", least,
        " (pp_size), ", kMaxPipelineBlocks, "]"));
  }
  if (block_state_bytes > kMaxBlockStateBytes) {
    return absl::InvalidArgumentError(absl::StrCat(field_prefix,
                                                   "block_state_bytes: ", block_state_bytes,
                                                   " is above 2^50 (", kMaxBlockStateBytes, ")"));
  }
  return absl::OkStatus();
}

absl::Status ValidateLayerSplit(const ::falcon::v1::LayerSplit& split, int dp, int pp, int blocks,
                                int64_t global_micro_batches) {
  if (dp < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("layer_split.replicas: empty (", dp, " DP groups; a job has at least 1)"));
  }
  if (pp < 1) {
    return absl::InvalidArgumentError(absl::StrCat("layer_split.replicas[0].stage_blocks: empty (",
                                                   pp, " stages; a pipeline has at least 1)"));
  }
  if (split.replicas_size() != dp) {
    return absl::InvalidArgumentError(absl::StrCat("layer_split.replicas: ", split.replicas_size(),
                                                   " entries for ", dp, " DP groups"));
  }
  if (split.micro_batches_size() != dp) {
    return absl::InvalidArgumentError(
        absl::StrCat("layer_split.micro_batches: ", split.micro_batches_size(), " entries for ", dp,
                     " DP groups"));
  }
  if (blocks < 0 || blocks > kMaxPipelineBlocks) {
    return absl::InvalidArgumentError(absl::StrCat(
        "layer_split: the model's ", blocks, " blocks are outside [0, ", kMaxPipelineBlocks, "]"));
  }
  int64_t first_sum = 0;
  for (int d = 0; d < dp; ++d) {
    const auto& stages = split.replicas(d).stage_blocks();
    if (stages.size() != pp) {
      return absl::InvalidArgumentError(absl::StrCat("layer_split.replicas[", d,
                                                     "].stage_blocks: ", stages.size(),
                                                     " entries for ", pp, " stages"));
    }
    int64_t sum = 0;
    for (int s = 0; s < pp; ++s) {
      if (stages[s] < 1 || stages[s] > kMaxPipelineBlocks) {
        return absl::InvalidArgumentError(
            absl::StrCat("layer_split.replicas[", d, "].stage_blocks[", s, "] = ", stages[s],
                         " is outside [1, ", kMaxPipelineBlocks, "]"));
      }
      sum += stages[s];
    }
    if (blocks > 0 && sum != blocks) {
      return absl::InvalidArgumentError(absl::StrCat("layer_split.replicas[", d,
                                                     "].stage_blocks sum to ", sum, ", not the ",
                                                     blocks, " blocks of the model"));
    }
    // The model's blocks unknown: every pipeline still holds the same model, replicas[0]'s.
    if (sum > kMaxPipelineBlocks) {
      return absl::InvalidArgumentError(
          absl::StrCat("layer_split.replicas[", d, "].stage_blocks sum to ", sum,
                       ", more than the ", kMaxPipelineBlocks, " blocks a pipeline may have"));
    }
    if (d > 0 && sum != first_sum) {
      return absl::InvalidArgumentError(
          absl::StrCat("layer_split.replicas[", d, "].stage_blocks sum to ", sum, ", not the ",
                       first_sum, " blocks of replicas[0] (every pipeline holds the whole model)"));
    }
    if (d == 0) first_sum = sum;
  }
  int64_t total = 0;
  for (int d = 0; d < dp; ++d) {
    const uint32_t m = split.micro_batches(d);
    if (m < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("layer_split.micro_batches[", d, "] = 0: every DP group needs >= 1"));
    }
    total += m;
  }
  if (global_micro_batches > 0 && total != global_micro_batches) {
    return absl::InvalidArgumentError(absl::StrCat("layer_split.micro_batches sum to ", total,
                                                   ", not the global ", global_micro_batches));
  }
  return absl::OkStatus();
}

std::vector<StageBlocks> StageBlocksOf(const ::falcon::v1::LayerSplit& split) {
  std::vector<StageBlocks> out;
  out.reserve(split.replicas_size());
  for (const auto& r : split.replicas()) {
    out.emplace_back(r.stage_blocks().begin(), r.stage_blocks().end());
  }
  return out;
}

void SetStageBlocks(const std::vector<StageBlocks>& replicas, ::falcon::v1::LayerSplit* split) {
  split->clear_replicas();
  for (const StageBlocks& stages : replicas) {
    auto* r = split->add_replicas();
    for (int b : stages) r->add_stage_blocks(static_cast<uint32_t>(b));
  }
}

bool IsEvenSplit(const std::vector<StageBlocks>& replicas, int blocks) {
  for (const StageBlocks& stages : replicas) {
    if (stages != EvenStageBlocks(blocks, static_cast<int>(stages.size()))) return false;
  }
  return true;
}

std::string StageBlocksText(const StageBlocks& stages) { return absl::StrJoin(stages, "+"); }

std::string SplitText(const std::vector<StageBlocks>& replicas, int blocks) {
  std::vector<std::string> parts;
  for (size_t d = 0; d < replicas.size(); ++d) {
    if (replicas[d] == EvenStageBlocks(blocks, static_cast<int>(replicas[d].size()))) continue;
    parts.push_back(absl::StrCat("dp", d, " ", StageBlocksText(replicas[d])));
  }
  return parts.empty() ? "even" : absl::StrJoin(parts, ", ");
}

}  // namespace falcon::common
