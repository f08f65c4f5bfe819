// Locates ../shared/real_data (public data sets used by tests; see its README.md).
// `./falcon test` passes the absolute path to Bazel as --test_env=FALCON_REAL_DATA=...
#ifndef FALCON_TESTS_REAL_DATA_H_
#define FALCON_TESTS_REAL_DATA_H_

#include <string>

#include "tests/testing/skip.h"

namespace falcon::tests {

// Absolute path of the real_data folder, or "" when FALCON_REAL_DATA is unset or missing.
std::string RealDataDir();

// RealDataDir() + "/" + relative. Fails the calling test (gtest ADD_FAILURE) and returns "" when
// the folder is unknown; a test calls FALCON_REQUIRE_REAL_DATA() first, so this only fires when
// a test forgot to.
std::string RealDataPath(const std::string& relative);

// Why the data is unavailable (names FALCON_REAL_DATA and how to pass it).
std::string RealDataMissingReason();

}  // namespace falcon::tests

// First statement of a test (or its fixture's SetUp) that reads real data: when the folder is
// unknown, the test is skipped with the reason, or fails under CI=true (tests/testing/skip.h).
#define FALCON_REQUIRE_REAL_DATA()                                   \
  do {                                                               \
    if (::falcon::tests::RealDataDir().empty()) {                    \
      FALCON_SKIP_OR_FAIL(::falcon::tests::RealDataMissingReason()); \
    }                                                                \
  } while (0)

#endif  // FALCON_TESTS_REAL_DATA_H_
