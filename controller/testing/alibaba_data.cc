#include "controller/testing/alibaba_data.h"

#include <utility>

#include "common/csv.h"

namespace falcon::controller::testing {

absl::StatusOr<std::map<int, std::vector<double>>> LoadAlibabaJob(const std::string& path) {
  absl::StatusOr<std::vector<common::AlibabaWorkerSeries>> workers =
      common::ReadAlibabaPaiCsv(path);
  if (!workers.ok()) return workers.status();
  std::map<int, std::vector<double>> out;
  for (common::AlibabaWorkerSeries& w : *workers) {
    out[static_cast<int>(w.worker)] = std::move(w.values);
  }
  return out;
}

}  // namespace falcon::controller::testing
