// Loads Alibaba PAI per-worker iteration times (../shared/real_data/alibaba_pai_minibatch_time,
// job_N_norm.csv: "<row>,worker,gpu,time,batch_time_norm"), each worker's series sorted by time.
#ifndef FALCON_CONTROLLER_TESTING_ALIBABA_DATA_H_
#define FALCON_CONTROLLER_TESTING_ALIBABA_DATA_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace falcon::controller::testing {

// worker -> batch_time_norm values in time order. Errors: kNotFound (file), kInvalidArgument
// (a malformed line, named by number).
absl::StatusOr<std::map<int, std::vector<double>>> LoadAlibabaJob(const std::string& path);

}  // namespace falcon::controller::testing

#endif  // FALCON_CONTROLLER_TESTING_ALIBABA_DATA_H_
