// The directive-kind vocabulary (docs/glossary.md, "directive"): one lower-case word per kind of
// falcon.v1.Directive, the same in the controller's log lines (strategy=), its metrics (the
// strategy label of falcon_controller_directives_issued_total) and falconctl (the KIND column).
// The proto's oneof names the body, the word names the kind:
//   pause      Pause                resume     Resume           profiling  ProfilingControl
//   s2         micro_batch_plan     s3         topology_change  s4         checkpoint_restart
//   s2l        layer_split
#ifndef FALCON_COMMON_DIRECTIVE_KIND_H_
#define FALCON_COMMON_DIRECTIVE_KIND_H_

#include "absl/strings/string_view.h"
#include "proto/falcon/v1/common.pb.h"

namespace falcon::common {

// The directive's kind word; "none" when its kind is not set.
absl::string_view DirectiveKindName(const ::falcon::v1::Directive& directive);

// A mitigation level's short name, as operators read it in falconctl and the demo report: "S1",
// "S2", "S2L", "S3", "S4"; empty for STRATEGY_UNSPECIFIED or an unknown value.
absl::string_view StrategyShortName(::falcon::v1::Strategy strategy);

// How a rank's REJECTED ack (DirectiveAck.reason) begins when the rank had already passed the
// directive's effective iteration when it arrived ("late: effective_iteration 82 passed (rank
// reached iteration 83)"): the shim writes it, the controller re-issues a late pause.
inline constexpr absl::string_view kLateRejectionPrefix = "late:";

}  // namespace falcon::common

#endif  // FALCON_COMMON_DIRECTIVE_KIND_H_
