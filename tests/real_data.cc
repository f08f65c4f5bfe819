#include "tests/real_data.h"

#include <sys/stat.h>

#include <cstdlib>

#include "gtest/gtest.h"

namespace falcon::tests {

std::string RealDataDir() {
  const char* dir = std::getenv("FALCON_REAL_DATA");
  if (dir == nullptr || *dir == '\0') return "";
  struct stat st;
  if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) return "";
  return dir;
}

std::string RealDataMissingReason() {
  const char* dir = std::getenv("FALCON_REAL_DATA");
  const std::string what = (dir == nullptr || *dir == '\0')
                               ? std::string("FALCON_REAL_DATA is unset")
                               : "FALCON_REAL_DATA=" + std::string(dir) + " is not a directory";
  return what +
         ": the public data sets (../shared/real_data) are missing; run through ./falcon test or "
         "pass --test_env=FALCON_REAL_DATA=/abs/path/to/shared/real_data";
}

std::string RealDataPath(const std::string& relative) {
  const std::string dir = RealDataDir();
  if (dir.empty()) {
    ADD_FAILURE() << RealDataMissingReason();
    return "";
  }
  return dir + "/" + relative;
}

}  // namespace falcon::tests
