// Skip-or-fail for a test that needs a tool or data set the machine may lack.
//
// A test whose precondition is missing must never count as passed. Elsewhere it is reported as
// skipped, with its reason; on CI (environment CI=true, forwarded by `./falcon test` as
// --test_env=CI) the missing tool or data set is a failure. Mechanism:
//   - the test prints one line `FALCON-TEST-SKIPPED: <reason>` (kSkipMarker) to stdout, which
//     lands in Bazel's test.log, and stops through GTEST_SKIP (exit 0);
//   - tools/test_summary.py reads each test's test.log (from the Build Event Protocol file) and
//     counts a test whose log holds the marker as skipped, printing the reason;
//   - under CI=true the test fails instead (GTEST_FAIL with the same reason).
// The shell-side twin for sh_test scripts is tests/testing/skip.sh.
#ifndef FALCON_TESTS_TESTING_SKIP_H_
#define FALCON_TESTS_TESTING_SKIP_H_

#include <string>

#include "gtest/gtest.h"

namespace falcon::tests::testing {

// The line prefix tools/test_summary.py looks for in test.log.
inline constexpr char kSkipMarker[] = "FALCON-TEST-SKIPPED: ";

// True when the environment variable CI is "true" (or "1"): a missing precondition fails.
bool MissingIsFailure();

// Prints `kSkipMarker + reason` on its own line to stdout and flushes.
void PrintSkipMarker(const std::string& reason);

// True when `path` exists and is executable by this process.
bool IsExecutable(const std::string& path);

}  // namespace falcon::tests::testing

// Stops the current test (the calling function must return void: a TEST body or SetUp()) because
// `reason` (a precondition that is missing, e.g. "/usr/bin/prometheus is not installed") holds:
// a failure under CI=true, else a skip the summary reports with `reason`.
#define FALCON_SKIP_OR_FAIL(reason)                                                     \
  do {                                                                                  \
    const std::string falcon_skip_reason_ = (reason);                                   \
    if (::falcon::tests::testing::MissingIsFailure()) {                                 \
      GTEST_FAIL() << "CI=true and a precondition is missing: " << falcon_skip_reason_; \
    }                                                                                   \
    ::falcon::tests::testing::PrintSkipMarker(falcon_skip_reason_);                     \
    GTEST_SKIP() << falcon_skip_reason_;                                                \
  } while (0)

// Skips or fails (as above) unless `path` is an executable file; `hint` says how to install it.
#define FALCON_REQUIRE_EXECUTABLE(path, hint)                                                   \
  do {                                                                                          \
    const std::string falcon_tool_path_ = (path);                                               \
    if (!::falcon::tests::testing::IsExecutable(falcon_tool_path_)) {                           \
      FALCON_SKIP_OR_FAIL(falcon_tool_path_ + " is not installed (" + std::string(hint) + ")"); \
    }                                                                                           \
  } while (0)

#endif  // FALCON_TESTS_TESTING_SKIP_H_
