#include "tests/testing/tmpfs.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "gtest/gtest.h"
#include "tests/testing/skip.h"

namespace falcon::tests::testing {
namespace {

TEST(TmpfsTest, FillsUpFreesAndUnmounts) {
  const std::string dir = std::string(std::getenv("TEST_TMPDIR")) + "/small-disk";
  {
    auto disk = Tmpfs::Mount(dir, 1 << 20);
    if (!disk.ok()) FALCON_SKIP_OR_FAIL(std::string(disk.status().message()));
    EXPECT_GT((*disk)->free_bytes(), 0u);
    auto filled = (*disk)->Fill("filler");
    ASSERT_TRUE(filled.ok()) << filled.status();
    EXPECT_GT(*filled, 0u);
    EXPECT_EQ((*disk)->free_bytes(), 0u);
    {
      std::ofstream out((*disk)->path() + "/more");
      out << std::string(8192, 'x');
      out.flush();
      EXPECT_FALSE(out.good());  // No space left.
    }
    ASSERT_TRUE((*disk)->Free("filler").ok());
    EXPECT_GE((*disk)->free_bytes(), *filled);
  }
  EXPECT_FALSE(std::filesystem::exists(dir));
  EXPECT_FALSE(Tmpfs::Mount("/nonexistent-parent/x", 1 << 20).ok());
}

}  // namespace
}  // namespace falcon::tests::testing
