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

}  // namespace falcon::common
