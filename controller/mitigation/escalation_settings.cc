#include "controller/mitigation/escalation_settings.h"

namespace falcon::controller::mitigation {

analysis::plan::EscalationOptions EscalationOptionsFor(const settings::EffectiveSettings& s) {
  analysis::plan::EscalationOptions o;
  o.s2_enabled = s.s2_enabled && s.mitigation_enabled;
  o.s3_enabled = s.s3_enabled && s.mitigation_enabled;
  o.s4_enabled = s.s4_enabled && s.mitigation_enabled;
  o.s2_cost_iterations = s.s2_cost_iterations;
  o.s3_cost = absl::Seconds(s.s3_cost_seconds);
  // S4 = write + read + restart; the setting is the total.
  o.checkpoint_write = absl::Seconds(s.s4_cost_seconds / 2);
  o.checkpoint_read = absl::Seconds(s.s4_cost_seconds / 2);
  o.restart = absl::ZeroDuration();
  o.s2l_enabled = s.s2l_enabled && s.mitigation_enabled;
  o.s2l_bandwidth_bytes_per_s = s.s2l_bandwidth_bytes_per_s;
  o.s2l_pause = absl::Seconds(s.s2l_pause_seconds);
  return o;
}

bool SameEscalationOptions(const analysis::plan::EscalationOptions& a,
                           const analysis::plan::EscalationOptions& b) {
  return a.s2_enabled == b.s2_enabled && a.s3_enabled == b.s3_enabled &&
         a.s4_enabled == b.s4_enabled && a.s2_cost_iterations == b.s2_cost_iterations &&
         a.s3_cost == b.s3_cost && a.checkpoint_write == b.checkpoint_write &&
         a.checkpoint_read == b.checkpoint_read && a.restart == b.restart &&
         a.s2l_enabled == b.s2l_enabled && a.s2l_resplittable == b.s2l_resplittable &&
         a.s2l_bytes_moved == b.s2l_bytes_moved &&
         a.s2l_bandwidth_bytes_per_s == b.s2l_bandwidth_bytes_per_s && a.s2l_pause == b.s2l_pause &&
         a.s2l_measured == b.s2l_measured;
}

analysis::plan::Cause ToEscalationCause(falcon::v1::Cause c) {
  switch (c) {
    case falcon::v1::CAUSE_COMPUTE:
      return analysis::plan::Cause::kCompute;
    case falcon::v1::CAUSE_COMMUNICATION:
      return analysis::plan::Cause::kCommunication;
    default:
      return analysis::plan::Cause::kUnknown;
  }
}

}  // namespace falcon::controller::mitigation
