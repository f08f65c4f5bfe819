#include "tests/testing/skip.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace falcon::tests::testing {

bool MissingIsFailure() {
  const char* ci = std::getenv("CI");
  return ci != nullptr && (std::strcmp(ci, "true") == 0 || std::strcmp(ci, "1") == 0);
}

void PrintSkipMarker(const std::string& reason) {
  std::fflush(stdout);
  std::printf("\n%s%s\n", kSkipMarker, reason.c_str());
  std::fflush(stdout);
}

bool IsExecutable(const std::string& path) { return access(path.c_str(), X_OK) == 0; }

}  // namespace falcon::tests::testing
