// RocksDbKvStore with a real RocksDB in a temporary directory: durability (Sync, the commit
// record), recovery after a full disk, and damage: a truncated or bit-flipped write-ahead log, a
// truncated MANIFEST, a missing or damaged CURRENT and a damaged table file are refused with
// kDataLoss naming the file, and repaired (with what was lost reported) when asked to.
//
// A "crash image" is a copy of the data directory taken while the store is open: what a kill -9
// leaves (the writes handed to the operating system, no clean close).
#include "controller/store/rocksdb_kv_store.h"

#include <fcntl.h>
#include <rocksdb/db.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/testing/file_damage.h"
#include "gtest/gtest.h"
#include "tests/testing/skip.h"
#include "tests/testing/tmpfs.h"

namespace falcon::controller::store {
namespace {

namespace fs = std::filesystem;

const std::vector<std::string> kTables = {"jobs", "events"};

std::string Dir(const std::string& name) {
  std::string dir = absl::StrCat(std::getenv("TEST_TMPDIR"), "/", name);
  fs::remove_all(dir);
  return dir;
}

RocksDbOptions Options(const std::string& path, bool repair = false) {
  RocksDbOptions o;
  o.path = path;
  o.repair = repair;
  return o;
}

std::string Key(int i) { return absl::StrFormat("job-%06d", i); }

// Commits [from, to), one batch each: a job and an event per commit.
void WriteRange(KvStore& kv, int from, int to) {
  for (int i = from; i < to; ++i) {
    KvWriteBatch b;
    b.Put("jobs", Key(i), std::string(200, 'j'));
    b.Put("events", Key(i), "e");
    ASSERT_TRUE(kv.Write(b).ok()) << i;
  }
}

std::set<std::string> Keys(const KvStore& kv, const std::string& table) {
  std::set<std::string> out;
  absl::Status s = kv.Scan(table, "", [&](absl::string_view k, absl::string_view) {
    out.emplace(k);
    return true;
  });
  EXPECT_TRUE(s.ok()) << s;
  return out;
}

// Keys of commits [0, n).
std::set<std::string> Prefix(int n) {
  std::set<std::string> out;
  for (int i = 0; i < n; ++i) out.insert(Key(i));
  return out;
}

std::vector<std::string> FilesEndingWith(const std::string& dir, const std::string& suffix) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (absl::EndsWith(name, suffix) || absl::StartsWith(name, suffix)) out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string OnlyWal(const std::string& dir) {
  std::vector<std::string> logs = FilesEndingWith(dir, ".log");
  EXPECT_EQ(logs.size(), 1u);
  return logs.empty() ? "" : logs.back();
}

void Truncate(const std::string& path, uint64_t size) { fs::resize_file(path, size); }

const store::StoreFigures kFigures = {{"jobs", 300}, {"events", 300}};

// A store with 300 synced commits, copied while open (the log holds them all) into `image`.
void MakeCrashImage(const std::string& image, int commits = 300) {
  const std::string live = image + "-live";
  fs::remove_all(live);
  auto kv = RocksDbKvStore::Open(Options(live), kTables);
  ASSERT_TRUE(kv.ok()) << kv.status();
  WriteRange(**kv, 0, commits);
  ASSERT_TRUE((*kv)->Sync(kFigures).ok());
  fs::copy(live, image, fs::copy_options::recursive);
}

// A store closed cleanly after 300 commits: everything is in table files.
void MakeClosedStore(const std::string& dir) {
  auto kv = RocksDbKvStore::Open(Options(dir), kTables);
  ASSERT_TRUE(kv.ok()) << kv.status();
  WriteRange(**kv, 0, 300);
  ASSERT_TRUE((*kv)->Sync(kFigures).ok());
}

::testing::AssertionResult IsDataLossNaming(const absl::Status& s, const std::string& file) {
  if (s.code() != absl::StatusCode::kDataLoss) {
    return ::testing::AssertionFailure() << "not DATA_LOSS: " << s;
  }
  if (s.message().find(file) == absl::string_view::npos) {
    return ::testing::AssertionFailure() << "does not name " << file << ": " << s;
  }
  return ::testing::AssertionSuccess();
}

TEST(RocksDbKvStoreTest, CrashImageOpensWithEverySyncedCommit) {
  const std::string image = Dir("crash");
  MakeCrashImage(image);
  auto kv = RocksDbKvStore::Open(Options(image), kTables);
  ASSERT_TRUE(kv.ok()) << kv.status();
  EXPECT_EQ(Keys(**kv, "jobs"), Prefix(300));
  EXPECT_EQ((*kv)->commit(), 300u);
  EXPECT_FALSE((*kv)->repair_report().has_value());
}

TEST(RocksDbKvStoreTest, CleanCloseKeepsEverythingAndTheRecordAcrossReopens) {
  const std::string dir = Dir("clean");
  MakeClosedStore(dir);
  for (int round = 0; round < 2; ++round) {
    auto kv = RocksDbKvStore::Open(Options(dir), kTables);
    ASSERT_TRUE(kv.ok()) << kv.status();
    EXPECT_EQ(Keys(**kv, "jobs").size(), 300u + 10u * round);
    EXPECT_EQ(Keys(**kv, "events").size(), 300u + 10u * round);
    WriteRange(**kv, 300 + 10 * round, 310 + 10 * round);
  }
  EXPECT_EQ(FilesEndingWith(dir, "FALCON_COMMIT").size(), 1u);
}

TEST(RocksDbKvStoreTest, StoreOfAnEarlierVersionOpensAndIsCheckedFromThenOn) {
  // As an earlier controller left it: the tables, no commit counter, no commit record.
  const std::string dir = Dir("upgrade");
  {
    rocksdb::Options o;
    o.create_if_missing = true;
    o.create_missing_column_families = true;
    std::vector<rocksdb::ColumnFamilyDescriptor> families = {
        {rocksdb::kDefaultColumnFamilyName, {}}, {"jobs", {}}, {"events", {}}};
    std::vector<rocksdb::ColumnFamilyHandle*> handles;
    rocksdb::DB* db = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(o, dir, families, &handles, &db).ok());
    for (int i = 0; i < 10; ++i) ASSERT_TRUE(db->Put({}, handles[1], Key(i), "j").ok());
    for (auto* h : handles) ASSERT_TRUE(db->DestroyColumnFamilyHandle(h).ok());
    ASSERT_TRUE(db->Close().ok());
    delete db;
  }
  {
    auto kv = RocksDbKvStore::Open(Options(dir), kTables);
    ASSERT_TRUE(kv.ok()) << kv.status();
    EXPECT_EQ(Keys(**kv, "jobs"), Prefix(10));
    EXPECT_EQ((*kv)->commit(), 0u);
    WriteRange(**kv, 10, 20);
    ASSERT_TRUE((*kv)->Sync(kFigures).ok());
  }
  // From now on damage is caught.
  const std::vector<std::string> manifests = FilesEndingWith(dir, "MANIFEST-");
  ASSERT_EQ(manifests.size(), 1u);
  Truncate(manifests[0], fs::file_size(manifests[0]) / 2);
  EXPECT_TRUE(IsDataLossNaming(RocksDbKvStore::Open(Options(dir), kTables).status(), manifests[0]));
}

// The commit record deleted beside a store this version wrote (break-it trial: with the record
// gone, a truncated log lost ~1,700 acknowledged iterations without a word): refused, naming
// the record; --repair checks the store and writes a new one.
TEST(RocksDbKvStoreTest, AMissingCommitRecordIsDataLossNamingIt) {
  const std::string image = Dir("no-record");
  MakeCrashImage(image);
  const std::vector<std::string> records = FilesEndingWith(image, "FALCON_COMMIT");
  ASSERT_EQ(records.size(), 1u);
  fs::remove(records[0]);
  EXPECT_TRUE(IsDataLossNaming(RocksDbKvStore::Open(Options(image), kTables).status(), records[0]));
  auto kv = RocksDbKvStore::Open(Options(image, /*repair=*/true), kTables);
  ASSERT_TRUE(kv.ok()) << kv.status();
  EXPECT_EQ(Keys(**kv, "jobs"), Prefix(300));
  kv->reset();
  EXPECT_TRUE(fs::exists(records[0]));
  EXPECT_TRUE(RocksDbKvStore::Open(Options(image), kTables).ok());
}

TEST(RocksDbKvStoreTest, TornUnsyncedTailOfACrashIsNotDamage) {
  const std::string live = Dir("torn-live");
  const std::string image = Dir("torn");
  auto kv = RocksDbKvStore::Open(Options(live), kTables);
  ASSERT_TRUE(kv.ok()) << kv.status();
  WriteRange(**kv, 0, 100);
  ASSERT_TRUE((*kv)->Sync(kFigures).ok());
  const uint64_t synced = fs::file_size(OnlyWal(live));
  WriteRange(**kv, 100, 110);  // Never synced: a crash may cut them anywhere.
  fs::copy(live, image, fs::copy_options::recursive);
  const std::string wal = OnlyWal(image);
  Truncate(wal, synced + (fs::file_size(wal) - synced) / 2);
  auto reopened = RocksDbKvStore::Open(Options(image), kTables);
  ASSERT_TRUE(reopened.ok()) << reopened.status();
  const std::set<std::string> keys = Keys(**reopened, "jobs");
  EXPECT_GE(keys.size(), 100u);
  EXPECT_LT(keys.size(), 110u);
  EXPECT_EQ(keys, Prefix(static_cast<int>(keys.size())));
}

TEST(RocksDbKvStoreTest, TruncatedWalIsDataLossNamingTheLog) {
  const std::string image = Dir("trunc-wal");
  MakeCrashImage(image);
  const std::string wal = OnlyWal(image);
  Truncate(wal, fs::file_size(wal) / 2);
  auto kv = RocksDbKvStore::Open(Options(image), kTables);
  EXPECT_TRUE(IsDataLossNaming(kv.status(), wal));
  // Refused before RocksDB touched anything: the same again.
  EXPECT_TRUE(IsDataLossNaming(RocksDbKvStore::Open(Options(image), kTables).status(), wal));
}

TEST(RocksDbKvStoreTest, TruncatedWalAtARecordBoundaryIsDataLoss) {
  // Cut exactly after an earlier commit (the log as it was at that point): no damaged record for
  // RocksDB to find, only the commit record knows.
  const std::string live = Dir("boundary-live");
  const std::string image = Dir("boundary");
  auto kv = RocksDbKvStore::Open(Options(live), kTables);
  ASSERT_TRUE(kv.ok()) << kv.status();
  WriteRange(**kv, 0, 200);
  ASSERT_TRUE((*kv)->Sync(kFigures).ok());
  const uint64_t at_200 = fs::file_size(OnlyWal(live));
  WriteRange(**kv, 200, 300);
  ASSERT_TRUE((*kv)->Sync(kFigures).ok());
  fs::copy(live, image, fs::copy_options::recursive);
  const std::string wal = OnlyWal(image);
  Truncate(wal, at_200);
  auto reopened = RocksDbKvStore::Open(Options(image), kTables);
  EXPECT_TRUE(IsDataLossNaming(reopened.status(), wal));
}

TEST(RocksDbKvStoreTest, FlippedWalByteIsDataLossNamingTheLog) {
  const std::string image = Dir("flip-wal");
  MakeCrashImage(image);
  const std::string wal = OnlyWal(image);
  ASSERT_TRUE(common::testing::FlipByte(wal, fs::file_size(wal) / 3).ok());
  auto kv = RocksDbKvStore::Open(Options(image), kTables);
  EXPECT_TRUE(IsDataLossNaming(kv.status(), fs::path(wal).filename().string()));
}

TEST(RocksDbKvStoreTest, TruncatedManifestIsDataLossNamingIt) {
  for (const bool crash : {true, false}) {
    SCOPED_TRACE(crash ? "crash image" : "closed cleanly");
    const std::string dir = Dir(crash ? "manifest-crash" : "manifest-closed");
    if (crash) {
      MakeCrashImage(dir);
    } else {
      MakeClosedStore(dir);
    }
    const std::vector<std::string> manifests = FilesEndingWith(dir, "MANIFEST-");
    ASSERT_EQ(manifests.size(), 1u);
    Truncate(manifests[0], fs::file_size(manifests[0]) / 2);
    auto kv = RocksDbKvStore::Open(Options(dir), kTables);
    EXPECT_TRUE(IsDataLossNaming(kv.status(), manifests[0]));
  }
}

TEST(RocksDbKvStoreTest, MissingOrDamagedCurrentIsDataLoss) {
  const std::string dir = Dir("current");
  MakeClosedStore(dir);
  const std::string saved = Dir("current-saved");
  fs::copy(dir, saved, fs::copy_options::recursive);
  fs::remove(dir + "/CURRENT");
  EXPECT_TRUE(IsDataLossNaming(RocksDbKvStore::Open(Options(dir), kTables).status(), "CURRENT"));
  {
    std::ofstream out(dir + "/CURRENT");
    out << "MANIFEST-999999\n";
  }
  EXPECT_EQ(RocksDbKvStore::Open(Options(dir), kTables).status().code(),
            absl::StatusCode::kDataLoss);
  // Nothing was created in its place: the saved copy of CURRENT brings everything back.
  fs::copy_file(saved + "/CURRENT", dir + "/CURRENT", fs::copy_options::overwrite_existing);
  auto kv = RocksDbKvStore::Open(Options(dir), kTables);
  ASSERT_TRUE(kv.ok()) << kv.status();
  EXPECT_EQ(Keys(**kv, "jobs"), Prefix(300));
}

TEST(RocksDbKvStoreTest, DamagedTableFileIsDataLossNamingIt) {
  const std::string dir = Dir("sst");
  MakeClosedStore(dir);
  std::vector<std::string> tables = FilesEndingWith(dir, ".sst");
  ASSERT_FALSE(tables.empty());
  // A truncated table file fails the open; a damaged block fails the read of it.
  const std::string dir2 = Dir("sst-flip");
  fs::copy(dir, dir2, fs::copy_options::recursive);
  Truncate(tables.back(), fs::file_size(tables.back()) / 2);
  EXPECT_TRUE(IsDataLossNaming(RocksDbKvStore::Open(Options(dir), kTables).status(),
                               fs::path(tables.back()).filename().string()));
  for (const std::string& t : FilesEndingWith(dir2, ".sst")) {
    ASSERT_TRUE(common::testing::FlipByte(t, 100).ok());
  }
  auto kv = RocksDbKvStore::Open(Options(dir2), kTables);
  if (kv.ok()) {
    absl::Status s =
        (*kv)->Scan("jobs", "", [](absl::string_view, absl::string_view) { return true; });
    EXPECT_TRUE(IsDataLossNaming(s, ".sst"));
  } else {
    EXPECT_TRUE(IsDataLossNaming(kv.status(), ".sst"));
  }
}

TEST(RocksDbKvStoreTest, RepairOfATruncatedWalKeepsAConsistentPrefixAndReportsTheLoss) {
  const std::string image = Dir("repair-wal");
  MakeCrashImage(image);
  const std::string wal = OnlyWal(image);
  Truncate(wal, fs::file_size(wal) / 2);
  auto kv = RocksDbKvStore::Open(Options(image, /*repair=*/true), kTables);
  ASSERT_TRUE(kv.ok()) << kv.status();
  ASSERT_TRUE((*kv)->repair_report().has_value());
  const store::RepairReport& r = *(*kv)->repair_report();
  EXPECT_EQ(r.commits_before, 300u);
  EXPECT_LT(r.commits_after, 300u);
  EXPECT_GT(r.commits_after, 0u);
  EXPECT_EQ(r.figures_before, kFigures);
  EXPECT_NE(r.damage.find(wal), std::string::npos) << r.damage;
  EXPECT_NE(r.method.find("point-in-time"), std::string::npos) << r.method;
  // Exactly the first commits_after commits, in both tables: a state the store really had.
  EXPECT_EQ(Keys(**kv, "jobs"), Prefix(static_cast<int>(r.commits_after)));
  EXPECT_EQ(Keys(**kv, "events"), Prefix(static_cast<int>(r.commits_after)));
  kv->reset();
  // Repaired for good: the next open needs no repair.
  auto again = RocksDbKvStore::Open(Options(image), kTables);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_FALSE((*again)->repair_report().has_value());
}

TEST(RocksDbKvStoreTest, RepairOfAFlippedWalByteKeepsTheCommitsBeforeIt) {
  const std::string image = Dir("repair-flip");
  MakeCrashImage(image);
  const std::string wal = OnlyWal(image);
  ASSERT_TRUE(common::testing::FlipByte(wal, fs::file_size(wal) / 3).ok());
  auto kv = RocksDbKvStore::Open(Options(image, true), kTables);
  ASSERT_TRUE(kv.ok()) << kv.status();
  ASSERT_TRUE((*kv)->repair_report().has_value());
  const uint64_t after = (*kv)->repair_report()->commits_after;
  EXPECT_LT(after, 300u);
  EXPECT_EQ(Keys(**kv, "jobs"), Prefix(static_cast<int>(after)));
  EXPECT_EQ(Keys(**kv, "events"), Prefix(static_cast<int>(after)));
}

TEST(RocksDbKvStoreTest, RepairOfATruncatedManifestRebuildsItFromTheTableFiles) {
  const std::string dir = Dir("repair-manifest");
  MakeClosedStore(dir);
  const std::vector<std::string> manifests = FilesEndingWith(dir, "MANIFEST-");
  ASSERT_EQ(manifests.size(), 1u);
  Truncate(manifests[0], fs::file_size(manifests[0]) / 2);
  auto kv = RocksDbKvStore::Open(Options(dir, true), kTables);
  ASSERT_TRUE(kv.ok()) << kv.status();
  ASSERT_TRUE((*kv)->repair_report().has_value());
  EXPECT_NE((*kv)->repair_report()->method.find("RepairDB"), std::string::npos);
  // A clean close put everything into table files: nothing is lost.
  EXPECT_EQ((*kv)->repair_report()->commits_after, 300u);
  EXPECT_EQ(Keys(**kv, "jobs"), Prefix(300));
  EXPECT_EQ(Keys(**kv, "events"), Prefix(300));
}

TEST(RocksDbKvStoreTest, RepairOfADamagedTableFileDropsItAndReportsTheLoss) {
  const std::string dir = Dir("repair-sst");
  MakeClosedStore(dir);
  for (const std::string& t : FilesEndingWith(dir, ".sst")) {
    ASSERT_TRUE(common::testing::FlipByte(t, 100).ok());
  }
  auto kv = RocksDbKvStore::Open(Options(dir, true), kTables);
  ASSERT_TRUE(kv.ok()) << kv.status();
  ASSERT_TRUE((*kv)->repair_report().has_value());
  EXPECT_LT(Keys(**kv, "jobs").size(), 300u);
  EXPECT_TRUE(fs::exists(dir + "/lost"));
  // The repaired store verifies.
  absl::Status s =
      (*kv)->Scan("jobs", "", [](absl::string_view, absl::string_view) { return true; });
  EXPECT_TRUE(s.ok()) << s;
}

TEST(RocksDbKvStoreTest, FullDiskFailsWritesUntilRecoverAndLosesNoSyncedCommit) {
  auto disk = tests::testing::Tmpfs::Mount(Dir("tmpfs"), 4 << 20);
  if (!disk.ok()) FALCON_SKIP_OR_FAIL(std::string(disk.status().message()));
  const std::string dir = (*disk)->path() + "/db";
  auto kv = RocksDbKvStore::Open(Options(dir), kTables);
  ASSERT_TRUE(kv.ok()) << kv.status();
  WriteRange(**kv, 0, 50);
  ASSERT_TRUE((*kv)->Sync(kFigures).ok());
  ASSERT_TRUE((*disk)->Fill("filler").ok());
  // Write until the log cannot grow.
  int i = 50;
  absl::Status failed;
  for (; i < 100000 && failed.ok(); ++i) {
    KvWriteBatch b;
    b.Put("jobs", Key(i), std::string(200, 'j'));
    b.Put("events", Key(i), "e");
    failed = (*kv)->Write(b);
    if (failed.ok()) failed = (*kv)->Sync(kFigures);
  }
  ASSERT_FALSE(failed.ok());
  const int first_failed = i - 1;
  // Refused, not retried, until Recover; Recover fails while the disk is full.
  KvWriteBatch more;
  more.Put("jobs", Key(first_failed), "x");
  EXPECT_EQ((*kv)->Write(more).code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ((*kv)->Sync(kFigures).code(), absl::StatusCode::kUnavailable);
  EXPECT_FALSE((*kv)->Recover().ok());
  ASSERT_TRUE((*disk)->Free("filler").ok());
  ASSERT_TRUE((*kv)->Recover().ok());
  // Every synced commit is there; the failed one may or may not be: write it again.
  std::set<std::string> keys = Keys(**kv, "jobs");
  for (int k = 0; k < first_failed; ++k) EXPECT_EQ(keys.count(Key(k)), 1u) << k;
  WriteRange(**kv, first_failed, first_failed + 20);
  ASSERT_TRUE((*kv)->Sync(kFigures).ok());
  kv->reset();
  auto reopened = RocksDbKvStore::Open(Options(dir), kTables);
  ASSERT_TRUE(reopened.ok()) << reopened.status();
  EXPECT_EQ(Keys(**reopened, "jobs"), Prefix(first_failed + 20));
}

}  // namespace
}  // namespace falcon::controller::store
