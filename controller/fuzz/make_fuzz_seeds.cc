// Writes the seed corpus of the ingest fuzzer: realistic inputs (ingest_fuzz.h), from Alibaba PAI
// job 1 when FALCON_REAL_DATA is set. Usage: make_fuzz_seeds OUT_DIR
#include <cstdlib>
#include <fstream>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "controller/fuzz/ingest_fuzz.h"
#include "controller/testing/alibaba_data.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: make_fuzz_seeds OUT_DIR\n";
    return 2;
  }
  std::map<int, std::vector<double>> data;
  const std::map<int, std::vector<double>>* times = nullptr;
  if (const char* real = std::getenv("FALCON_REAL_DATA")) {
    auto loaded = falcon::controller::testing::LoadAlibabaJob(
        absl::StrCat(real, "/alibaba_pai_minibatch_time/job_1_norm.csv"));
    if (loaded.ok()) {
      data = *loaded;
      times = &data;
    }
  }
  int n = 0;
  for (const auto& seed : falcon::controller::fuzz::SeedMessages(times)) {
    std::ofstream out(absl::StrCat(argv[1], "/seed-", n++), std::ios::binary);
    out << falcon::controller::fuzz::EncodeInput(seed);
  }
  std::cout << "wrote " << n << " seeds (" << (times ? "real" : "synthetic")
            << " iteration times)\n";
  return 0;
}
