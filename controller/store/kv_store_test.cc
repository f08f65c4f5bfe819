// Conformance tests run against both KvStore implementations.
#include <cstdlib>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "controller/store/in_memory_kv_store.h"
#include "controller/store/rocksdb_kv_store.h"
#include "gtest/gtest.h"

namespace falcon::controller::store {
namespace {

std::string TmpDir(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  std::string safe = name;
  for (char& c : safe) {
    if (c == '/') c = '_';
  }
  return std::string(tmp ? tmp : "/tmp") + "/" + safe;
}

using Factory = std::function<std::unique_ptr<KvStore>(const std::string& test_name)>;

class KvStoreTest : public ::testing::TestWithParam<std::pair<std::string, Factory>> {
 protected:
  void SetUp() override {
    store_ = GetParam().second(::testing::UnitTest::GetInstance()->current_test_info()->name());
    ASSERT_NE(store_, nullptr);
  }
  std::vector<std::pair<std::string, std::string>> ScanAll(const std::string& table,
                                                           const std::string& prefix) {
    std::vector<std::pair<std::string, std::string>> out;
    absl::Status s = store_->Scan(table, prefix, [&](absl::string_view k, absl::string_view v) {
      out.emplace_back(std::string(k), std::string(v));
      return true;
    });
    EXPECT_TRUE(s.ok()) << s;
    return out;
  }
  std::unique_ptr<KvStore> store_;
};

TEST_P(KvStoreTest, PutGetDeleteAcrossTables) {
  KvWriteBatch batch;
  batch.Put("a", "k1", "v1");
  batch.Put("b", "k1", "other");
  ASSERT_TRUE(store_->Write(batch).ok());
  EXPECT_EQ(*store_->Get("a", "k1"), "v1");
  EXPECT_EQ(*store_->Get("b", "k1"), "other");
  EXPECT_TRUE(absl::IsNotFound(store_->Get("a", "k2").status()));

  KvWriteBatch del;
  del.Delete("a", "k1");
  ASSERT_TRUE(store_->Write(del).ok());
  EXPECT_TRUE(absl::IsNotFound(store_->Get("a", "k1").status()));
  EXPECT_EQ(*store_->Get("b", "k1"), "other");
}

TEST_P(KvStoreTest, UnknownTableIsInvalidArgumentAndBatchIsAtomic) {
  KvWriteBatch batch;
  batch.Put("a", "k", "v");
  batch.Put("nope", "k", "v");
  EXPECT_EQ(store_->Write(batch).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::IsNotFound(store_->Get("a", "k").status()));
  EXPECT_EQ(store_->Get("nope", "k").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->Scan("nope", "", [](auto, auto) { return true; }).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_P(KvStoreTest, PrefixScanIsOrderedAndBounded) {
  KvWriteBatch batch;
  for (const char* k : {"job2\x01", "job1\x02", "job1\x01", "job\xff", "job1", "jobz"}) {
    batch.Put("a", k, std::string("v") + k);
  }
  batch.Put("a", std::string("job1\0x", 6), "nul");
  ASSERT_TRUE(store_->Write(batch).ok());
  auto got = ScanAll("a", "job1");
  ASSERT_EQ(got.size(), 4u);
  EXPECT_EQ(got[0].first, "job1");
  EXPECT_EQ(got[1].first, std::string("job1\0x", 6));
  EXPECT_EQ(got[2].first, "job1\x01");
  EXPECT_EQ(got[3].first, "job1\x02");
  EXPECT_EQ(ScanAll("a", "").size(), 7u);
  // Early stop.
  int seen = 0;
  ASSERT_TRUE(store_->Scan("a", "", [&](auto, auto) { return ++seen < 2; }).ok());
  EXPECT_EQ(seen, 2);
}

TEST_P(KvStoreTest, DeleteRangeRemovesHalfOpenRange) {
  KvWriteBatch batch;
  for (const char* k : {"r1", "r2", "r3", "r4"}) batch.Put("a", k, "x");
  ASSERT_TRUE(store_->Write(batch).ok());
  KvWriteBatch del;
  del.DeleteRange("a", "r2", "r4");
  ASSERT_TRUE(store_->Write(del).ok());
  auto got = ScanAll("a", "r");
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].first, "r1");
  EXPECT_EQ(got[1].first, "r4");
}

TEST(PrefixSuccessorTest, Cases) {
  EXPECT_EQ(PrefixSuccessor("ab"), "ac");
  EXPECT_EQ(PrefixSuccessor(std::string("a\xff", 2)), "b");
  EXPECT_EQ(PrefixSuccessor("\xff"), "");
  EXPECT_EQ(PrefixSuccessor(""), "");
}

TEST(RocksDbKvStoreTest, DataSurvivesReopenAndLockIsExclusive) {
  RocksDbOptions options;
  options.path = TmpDir("reopen_db");
  {
    auto store = RocksDbKvStore::Open(options, {"a", "b"});
    ASSERT_TRUE(store.ok()) << store.status();
    KvWriteBatch batch;
    batch.Put("b", "key", "value");
    ASSERT_TRUE((*store)->Write(batch).ok());
    // A second open of the same directory fails while the first holds the lock.
    auto second = RocksDbKvStore::Open(options, {"a", "b"});
    EXPECT_FALSE(second.ok());
  }
  auto reopened = RocksDbKvStore::Open(options, {"a", "b", "c"});
  ASSERT_TRUE(reopened.ok()) << reopened.status();
  EXPECT_EQ(*(*reopened)->Get("b", "key"), "value");
  EXPECT_TRUE(absl::IsNotFound((*reopened)->Get("c", "key").status()));
}

TEST(RocksDbKvStoreTest, EmptyPathIsInvalidArgument) {
  EXPECT_EQ(RocksDbKvStore::Open(RocksDbOptions(), {"a"}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

INSTANTIATE_TEST_SUITE_P(
    Stores, KvStoreTest,
    ::testing::Values(
        std::make_pair(
            std::string("InMemory"), Factory([](const std::string&) -> std::unique_ptr<KvStore> {
              return std::make_unique<InMemoryKvStore>(std::vector<std::string>{"a", "b"});
            })),
        std::make_pair(std::string("RocksDb"),
                       Factory([](const std::string& name) -> std::unique_ptr<KvStore> {
                         RocksDbOptions options;
                         options.path = TmpDir("kv_" + name);
                         auto store = RocksDbKvStore::Open(options, {"a", "b"});
                         if (!store.ok()) return nullptr;
                         return std::move(*store);
                       }))),
    [](const auto& info) { return info.param.first; });

}  // namespace
}  // namespace falcon::controller::store
