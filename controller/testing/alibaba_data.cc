#include "controller/testing/alibaba_data.h"

#include <fstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace falcon::controller::testing {

absl::StatusOr<std::map<int, std::vector<double>>> LoadAlibabaJob(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  std::string line;
  std::getline(in, line);  // Header.
  std::map<int, std::map<int, double>> by_worker;
  int number = 1;
  while (std::getline(in, line)) {
    ++number;
    if (line.empty()) continue;
    std::vector<std::string> f = absl::StrSplit(line, ',');
    int worker = 0, time = 0;
    double value = 0;
    if (f.size() != 5 || !absl::SimpleAtoi(f[1], &worker) || !absl::SimpleAtoi(f[3], &time) ||
        !absl::SimpleAtod(f[4], &value)) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": line ", number, " is malformed"));
    }
    by_worker[worker][time] = value;
  }
  std::map<int, std::vector<double>> out;
  for (const auto& [worker, series] : by_worker) {
    for (const auto& [time, value] : series) out[worker].push_back(value);
  }
  return out;
}

}  // namespace falcon::controller::testing
