// Alibaba PAI per-worker iteration times for the controller's replay tests, in the shape the test
// fixtures take: the file is read by common::ReadAlibabaPaiCsv (common/csv.h).
#ifndef FALCON_CONTROLLER_TESTING_ALIBABA_DATA_H_
#define FALCON_CONTROLLER_TESTING_ALIBABA_DATA_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace falcon::controller::testing {

// worker -> batch_time_norm values in time order. Errors: those of common::ReadAlibabaPaiCsv
// (kNotFound for the file, kInvalidArgument naming the line).
absl::StatusOr<std::map<int, std::vector<double>>> LoadAlibabaJob(const std::string& path);

}  // namespace falcon::controller::testing

#endif  // FALCON_CONTROLLER_TESTING_ALIBABA_DATA_H_
