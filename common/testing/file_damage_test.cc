#include "common/testing/file_damage.h"

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "gtest/gtest.h"

namespace falcon::common::testing {
namespace {

TEST(FlipByteTest, ChangesExactlyThatByte) {
  const std::string path = std::string(std::getenv("TEST_TMPDIR")) + "/f";
  std::ofstream(path) << "abcdef";
  ASSERT_TRUE(FlipByte(path, 2).ok());
  std::stringstream s;
  s << std::ifstream(path).rdbuf();
  EXPECT_EQ(s.str(), std::string("ab") + static_cast<char>('c' ^ 0x5a) + "def");
  EXPECT_EQ(FlipByte(path, 6).code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(FlipByte(path + ".none", 0).code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace falcon::common::testing
