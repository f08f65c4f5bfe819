// What the agent and the controller both read off a falcon.v1.TelemetryBatch.
#ifndef FALCON_COMMON_TELEMETRY_BATCH_H_
#define FALCON_COMMON_TELEMETRY_BATCH_H_

#include <cstdint>

#include "proto/falcon/v1/telemetry.pb.h"

namespace falcon::common {

// Op records in the batch: `ops` (of `op_rank`) and every `rank_ops[k].ops`.
int64_t OpRecordCount(const falcon::v1::TelemetryBatch& batch);

}  // namespace falcon::common

#endif  // FALCON_COMMON_TELEMETRY_BATCH_H_
