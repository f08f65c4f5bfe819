#include "common/directive_kind.h"

namespace falcon::common {

absl::string_view DirectiveKindName(const ::falcon::v1::Directive& directive) {
  switch (directive.kind_case()) {
    case ::falcon::v1::Directive::kMicroBatchPlan:
      return "s2";
    case ::falcon::v1::Directive::kLayerSplit:
      return "s2l";
    case ::falcon::v1::Directive::kTopologyChange:
      return "s3";
    case ::falcon::v1::Directive::kCheckpointRestart:
      return "s4";
    case ::falcon::v1::Directive::kPause:
      return "pause";
    case ::falcon::v1::Directive::kResume:
      return "resume";
    case ::falcon::v1::Directive::kProfiling:
      return "profiling";
    case ::falcon::v1::Directive::KIND_NOT_SET:
      break;
  }
  return "none";
}

absl::string_view StrategyShortName(::falcon::v1::Strategy strategy) {
  switch (strategy) {
    case ::falcon::v1::STRATEGY_S1_IGNORE:
      return "S1";
    case ::falcon::v1::STRATEGY_S2_MICRO_BATCH:
      return "S2";
    case ::falcon::v1::STRATEGY_S2L_LAYER_SPLIT:
      return "S2L";
    case ::falcon::v1::STRATEGY_S3_TOPOLOGY:
      return "S3";
    case ::falcon::v1::STRATEGY_S4_CHECKPOINT_RESTART:
      return "S4";
    default:
      return "";
  }
}

}  // namespace falcon::common
