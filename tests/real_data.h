// Locates ../shared/real_data (public data sets used by tests; see its README.md).
// `./falcon test` passes the absolute path to Bazel as --test_env=FALCON_REAL_DATA=...
#ifndef FALCON_TESTS_REAL_DATA_H_
#define FALCON_TESTS_REAL_DATA_H_

#include <string>

namespace falcon::testing {

// Absolute path of the real_data folder, or "" when FALCON_REAL_DATA is unset or missing.
std::string RealDataDir();

// RealDataDir() + "/" + relative. Fails the calling test (gtest ADD_FAILURE) and returns "" when
// the folder is unknown, so a missing data set is a failure, never a silent skip.
std::string RealDataPath(const std::string& relative);

}  // namespace falcon::testing

#endif  // FALCON_TESTS_REAL_DATA_H_
