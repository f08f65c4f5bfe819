#include "common/telemetry_batch.h"

namespace falcon::common {

int64_t OpRecordCount(const falcon::v1::TelemetryBatch& batch) {
  int64_t n = batch.ops_size();
  for (const falcon::v1::RankOps& ro : batch.rank_ops()) n += ro.ops_size();
  return n;
}

}  // namespace falcon::common
