#include "tests/real_data.h"

#include <sys/stat.h>

#include <cstdlib>

#include "gtest/gtest.h"

namespace falcon::testing {

std::string RealDataDir() {
  const char* dir = std::getenv("FALCON_REAL_DATA");
  if (dir == nullptr || *dir == '\0') return "";
  struct stat st;
  if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) return "";
  return dir;
}

std::string RealDataPath(const std::string& relative) {
  const std::string dir = RealDataDir();
  if (dir.empty()) {
    ADD_FAILURE() << "FALCON_REAL_DATA is unset or not a directory; run through ./falcon test or "
                     "pass --test_env=FALCON_REAL_DATA=/abs/path/to/shared/real_data";
    return "";
  }
  return dir + "/" + relative;
}

}  // namespace falcon::testing
