#include "collective/store.h"

#include <cstdlib>
#include <thread>

#include "gtest/gtest.h"

namespace falcon::collective {
namespace {

std::string Dir(const char* name) {
  const char* base = std::getenv("TEST_TMPDIR");
  return std::string(base != nullptr ? base : "/tmp") + "/" + name;
}

TEST(RendezvousStoreTest, SetThenGetAnyKeyAndBinaryValue) {
  auto store = RendezvousStore::Open(Dir("store_a/nested"));
  ASSERT_TRUE(store.ok()) << store.status();
  const std::string value("a\0b/c", 5);
  ASSERT_TRUE((*store)->Set("gloo.00ff/rank_1 x", value).ok());
  auto got = (*store)->Get("gloo.00ff/rank_1 x", absl::Seconds(1));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, value);
  EXPECT_TRUE((*store)->Has("gloo.00ff/rank_1 x"));
  EXPECT_FALSE((*store)->Has("gloo.00ff/rank_2 x"));
}

TEST(RendezvousStoreTest, GetWaitsForALateWriter) {
  auto store = RendezvousStore::Open(Dir("store_b"));
  ASSERT_TRUE(store.ok());
  std::thread writer([&] {
    absl::SleepFor(absl::Milliseconds(30));
    ASSERT_TRUE((*store)->Set("late", "v").ok());
  });
  auto got = (*store)->Get("late", absl::Seconds(10));
  writer.join();
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(*got, "v");
}

TEST(RendezvousStoreTest, MissingKeyTimesOutNamingIt) {
  auto store = RendezvousStore::Open(Dir("store_c"));
  ASSERT_TRUE(store.ok());
  auto got = (*store)->Get("rank_7", absl::Milliseconds(20));
  EXPECT_EQ(got.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(got.status().message().find("rank_7"), absl::string_view::npos);
}

TEST(RendezvousStoreTest, BadDirectories) {
  EXPECT_EQ(RendezvousStore::Open("").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RendezvousStore::Open("/proc/falcon_no_such/dir").status().code(),
            absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace falcon::collective
