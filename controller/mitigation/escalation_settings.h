// The escalation policy's inputs from a job's settings (analysis/plan/escalation.h decides when
// to try which level; docs/algorithms.md#escalation). Costs: S2 = s2_cost_iterations × Δt_iter,
// S2L = bytes moved / s2l_bandwidth_bytes_per_s + a pause (s2l_pause_seconds; each until the
// job's last S2L measured it), S3 = s3_cost_seconds, S4 = s4_cost_seconds (split evenly between
// checkpoint write and read). A level is enabled when its setting and mitigation_enabled are on.
// What S2L's cost needs of the job and its plan (s2l_resplittable, s2l_bytes_moved, s2l_measured)
// is the event's to fill (MitigationEvent::EscalationOptionsNow).
#ifndef FALCON_CONTROLLER_MITIGATION_ESCALATION_SETTINGS_H_
#define FALCON_CONTROLLER_MITIGATION_ESCALATION_SETTINGS_H_

#include "analysis/plan/escalation.h"
#include "controller/settings/settings_manager.h"
#include "proto/falcon/v1/common.pb.h"

namespace falcon::controller::mitigation {

analysis::plan::EscalationOptions EscalationOptionsFor(const settings::EffectiveSettings& settings);
// Field by field: whether the options in force must be updated.
bool SameEscalationOptions(const analysis::plan::EscalationOptions& a,
                           const analysis::plan::EscalationOptions& b);
// CAUSE_COMPUTE / CAUSE_COMMUNICATION; anything else is unknown.
analysis::plan::Cause ToEscalationCause(falcon::v1::Cause cause);

}  // namespace falcon::controller::mitigation

#endif  // FALCON_CONTROLLER_MITIGATION_ESCALATION_SETTINGS_H_
