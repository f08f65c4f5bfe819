// Checks a JobRegistration against telemetry.proto's documented ranges. Pure.
#ifndef FALCON_CONTROLLER_REGISTRY_REGISTRATION_VALIDATOR_H_
#define FALCON_CONTROLLER_REGISTRY_REGISTRATION_VALIDATOR_H_

#include "absl/strings/string_view.h"
#include "controller/util/field_error.h"
#include "proto/falcon/v1/telemetry.pb.h"

namespace falcon::controller::registry {

inline constexpr uint32_t kMaxWorldSize = 1u << 20;

// nullopt when valid; otherwise the first offending field under `path` (e.g.
// "hello.jobs[0].ranks[2].node"). Checks: job name; world_size in [1, 2^20]; ranks distinct, in
// [0, world_size), with a node, pid > 0, gpu >= -1, layout indices -1 or inside the hinted
// sizes; communicators with distinct non-zero ids, known kinds, non-empty distinct members in
// [0, world_size), names <= 128 bytes; dp*pp*tp == world_size when all three are hinted;
// the pipeline shape (common::ValidatePipelineShape: pipeline_blocks 0 or [max(pp_size, 1), 4096];
// block_state_bytes <= 2^50).
util::MaybeFieldError ValidateJobRegistration(const falcon::v1::JobRegistration& reg,
                                              absl::string_view path);

}  // namespace falcon::controller::registry

#endif  // FALCON_CONTROLLER_REGISTRY_REGISTRATION_VALIDATOR_H_
