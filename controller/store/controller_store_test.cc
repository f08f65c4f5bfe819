#include "controller/store/controller_store.h"

#include <cstdlib>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "common/clock.h"
#include "controller/store/in_memory_kv_store.h"
#include "controller/store/keys.h"
#include "controller/store/rocksdb_kv_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace falcon::controller::store {
namespace {

TEST(KeysTest, SampleRowKeysOrderByIterationAndRoundTrip) {
  EXPECT_LT(keys::SampleRowKey("j", 255, 9), keys::SampleRowKey("j", 256, 0));
  EXPECT_LT(keys::SampleRowKey("j", 7, 8), keys::SampleRowKey("j", 7, 16));
  EXPECT_LT(keys::SampleRowKey("j", 1'000'000, 0), keys::SampleRowKey("j0", 0, 0));
  std::string job;
  uint32_t rank = 0;
  int64_t iteration = 0;
  ASSERT_TRUE(
      keys::ParseSampleRowKey(keys::SampleRowKey("job-a", 123456789, 7), &job, &iteration, &rank));
  EXPECT_EQ(job, "job-a");
  EXPECT_EQ(rank, 7u);
  EXPECT_EQ(iteration, 123456789);
  EXPECT_FALSE(keys::ParseSampleRowKey("no-separator", &job, &iteration, &rank));
  EXPECT_FALSE(keys::ParseSampleRowKey(std::string("j\0\1\2", 4), &job, &iteration, &rank));
  ASSERT_TRUE(
      keys::ParseLegacySampleKey(keys::LegacySampleKey("job-b", 3, 42), &job, &rank, &iteration));
  EXPECT_EQ(job, "job-b");
  EXPECT_EQ(rank, 3u);
  EXPECT_EQ(iteration, 42);
}

class ControllerStoreTest : public ::testing::Test {
 protected:
  ControllerStoreTest()
      : kv_(ControllerStore::TableNames()),
        store_(&kv_, &clock_, [this](absl::Duration, const absl::Status& s) {
          ++commits_;
          if (!s.ok()) ++failures_;
        }) {}
  common::FakeClock clock_;
  InMemoryKvStore kv_;
  int commits_ = 0;
  int failures_ = 0;
  ControllerStore store_;
};

TEST_F(ControllerStoreTest, RecordsRoundTripThroughOneCommit) {
  StoreTxn txn;
  v1::JobRecord job;
  job.mutable_job()->set_job("llm");
  job.mutable_job()->set_world_size(8);
  txn.PutJob(job);
  v1::EventRecord event;
  event.mutable_event()->set_event_id(3);
  event.mutable_event()->set_job("llm");
  event.set_phase(v1::PHASE_PROFILING);
  txn.PutEvent(event);
  falcon::v1::Settings settings;
  settings.set_job("llm");
  settings.set_hazard(0.01);
  txn.PutSettings(settings);
  v1::AgentRecord agent;
  agent.set_agent_id("node-1");
  agent.set_acked_sequence(41);
  txn.PutAgent(agent);
  v1::MetaRecord meta;
  meta.set_next_event_id(4);
  txn.PutMeta(meta);
  falcon::v1::DirectiveRecord directive;
  directive.mutable_directive()->set_job("llm");
  directive.mutable_directive()->set_directive_id(9);
  txn.PutDirective(directive);
  ASSERT_TRUE(store_.Commit(&txn).ok());
  EXPECT_TRUE(txn.empty());
  EXPECT_EQ(commits_, 1);
  EXPECT_EQ(kv_.write_count(), 1);

  EXPECT_EQ(store_.LoadJobs()->at(0).job().world_size(), 8u);
  EXPECT_EQ(store_.LoadEvents()->at(0).phase(), v1::PHASE_PROFILING);
  EXPECT_DOUBLE_EQ(store_.LoadSettings()->at(0).hazard(), 0.01);
  EXPECT_EQ(store_.LoadAgents()->at(0).acked_sequence(), 41u);
  EXPECT_EQ(store_.LoadMeta()->next_event_id(), 4u);
  EXPECT_EQ(store_.LoadDirectives()->at(0).directive().directive_id(), 9u);
}

TEST_F(ControllerStoreTest, MetaDefaultsWhenAbsentAndEmptyCommitIsNoop) {
  EXPECT_EQ(store_.LoadMeta()->next_event_id(), 0u);
  StoreTxn txn;
  ASSERT_TRUE(store_.Commit(&txn).ok());
  EXPECT_EQ(commits_, 0);
}

TEST_F(ControllerStoreTest, HistoryFromIterationAndPerJob) {
  StoreTxn txn;
  for (int64_t it : {0, 10, 20, 300}) {
    falcon::v1::HistoryPoint p;
    p.set_iteration(it);
    p.set_iteration_time_ns(1000 + it);
    txn.PutHistory("a", p);
    txn.PutHistory("ab", p);  // A job whose name extends "a" must not leak into "a".
  }
  ASSERT_TRUE(store_.Commit(&txn).ok());
  auto points = store_.LoadHistory("a", 10);
  ASSERT_TRUE(points.ok());
  ASSERT_EQ(points->size(), 3u);
  EXPECT_EQ((*points)[0].iteration(), 10);
  EXPECT_EQ((*points)[2].iteration(), 300);
  EXPECT_EQ(store_.LoadHistory("a", 0)->size(), 4u);
  EXPECT_EQ(store_.LoadHistory("zzz", 0)->size(), 0u);
}

TEST_F(ControllerStoreTest, SampleRowsTrimAndDeletePerJob) {
  StoreTxn txn;
  for (int64_t it = 0; it < 10; ++it) {
    // Two agents' rows of each iteration: ranks {2, 0} and {1}.
    txn.PutSampleRow("j", it, std::vector<RankSample>{{2, 100 * it + 2}, {0, 100 * it}});
    txn.PutSampleRow("j", it, std::vector<RankSample>{{1, 100 * it + 1}});
  }
  txn.PutSampleRow("j2", 0, std::vector<RankSample>{{0, 5}});
  txn.PutSampleRow("j", 11, {});  // Nothing to store.
  ASSERT_TRUE(store_.Commit(&txn).ok());
  txn.TrimSamples("j", 7);
  ASSERT_TRUE(store_.Commit(&txn).ok());
  std::vector<std::tuple<uint32_t, int64_t, int64_t>> seen;
  ASSERT_TRUE(store_
                  .ScanSamples("j", [&](uint32_t r, int64_t it,
                                        int64_t ns) { seen.emplace_back(r, it, ns); })
                  .ok());
  // Iterations 7 to 9, in iteration order; each row's ranks as stored.
  ASSERT_EQ(seen.size(), 9u);
  EXPECT_EQ(seen[0], std::make_tuple(2u, int64_t{7}, int64_t{702}));
  EXPECT_EQ(seen[1], std::make_tuple(0u, int64_t{7}, int64_t{700}));
  EXPECT_EQ(seen[2], std::make_tuple(1u, int64_t{7}, int64_t{701}));
  EXPECT_EQ(seen[8], std::make_tuple(1u, int64_t{9}, int64_t{901}));
  txn.DeleteJobSamples("j");
  ASSERT_TRUE(store_.Commit(&txn).ok());
  int left = 0;
  ASSERT_TRUE(store_.ScanSamples("j", [&](uint32_t, int64_t, int64_t) { ++left; }).ok());
  EXPECT_EQ(left, 0);
  ASSERT_TRUE(store_.ScanSamples("j2", [&](uint32_t, int64_t, int64_t) { ++left; }).ok());
  EXPECT_EQ(left, 1);
}

// A store of an earlier version (a row per rank and iteration in `samples`): read as they are,
// then moved to sample_rows in one commit, leaving no legacy row behind.
TEST_F(ControllerStoreTest, LegacySamplesAreReadAndMovedToSampleRows) {
  KvWriteBatch old;
  for (uint32_t rank : {0u, 1u}) {
    for (int64_t it = 3; it < 5; ++it) {
      std::string v;
      keys::AppendU64(&v, static_cast<uint64_t>(10 * it + rank));
      old.Put(tables::kLegacySamples, keys::LegacySampleKey("j", rank, it), v);
    }
  }
  std::string v;
  keys::AppendU64(&v, 77);
  old.Put(tables::kLegacySamples, keys::LegacySampleKey("k", 0, 1), v);
  ASSERT_TRUE(kv_.Write(old).ok());
  auto all = [&](const std::string& job) {
    std::set<std::tuple<uint32_t, int64_t, int64_t>> seen;
    EXPECT_TRUE(
        store_
            .ScanSamples(job, [&](uint32_t r, int64_t it, int64_t ns) { seen.emplace(r, it, ns); })
            .ok());
    return seen;
  };
  const std::set<std::tuple<uint32_t, int64_t, int64_t>> before = all("j");
  ASSERT_EQ(before.size(), 4u);
  EXPECT_EQ(before.count({1u, int64_t{4}, int64_t{41}}), 1u);
  StoreTxn txn;
  absl::StatusOr<int64_t> moved = store_.MoveLegacySamples(&txn);
  ASSERT_TRUE(moved.ok()) << moved.status();
  EXPECT_EQ(*moved, 5);
  ASSERT_TRUE(store_.Commit(&txn).ok());
  EXPECT_EQ(all("j"), before);  // Each once: from sample_rows now.
  EXPECT_EQ(all("k").size(), 1u);
  int legacy = 0;
  ASSERT_TRUE(kv_.Scan(tables::kLegacySamples, "",
                       [&](absl::string_view, absl::string_view) {
                         ++legacy;
                         return true;
                       })
                  .ok());
  EXPECT_EQ(legacy, 0);
  StoreTxn again;
  EXPECT_EQ(*store_.MoveLegacySamples(&again), 0);
  EXPECT_TRUE(again.empty());
}

TEST_F(ControllerStoreTest, MalformedSampleRowIsDataLossNamingTheTable) {
  KvWriteBatch bad;
  bad.Put(tables::kSampleRows, keys::SampleRowKey("j", 1, 0), "short");
  ASSERT_TRUE(kv_.Write(bad).ok());
  absl::Status s = store_.ScanSamples("j", [](uint32_t, int64_t, int64_t) {});
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), ::testing::HasSubstr("sample_rows"));
}

// Each kind of damage to a sample row: the error names the job, the key and what is wrong; asked
// to go on, the scan skips the row and returns the sound ones.
TEST_F(ControllerStoreTest, DamagedSampleRowsAreNamedOrSkipped) {
  auto pair = [](uint32_t rank, uint64_t ns) {
    std::string v;
    keys::AppendU32(&v, rank);
    keys::AppendU64(&v, ns);
    return v;
  };
  StoreTxn good;
  good.PutSampleRow("j", 1, std::vector<RankSample>{{0, 10}, {1, 11}});
  ASSERT_TRUE(store_.Commit(&good).ok());
  const std::vector<std::pair<std::string, std::string>> cases = {
      {keys::SampleRowKey("j", 2, 0), pair(0, 20).substr(0, 11)},
      {keys::SampleRowKey("j", 3, 0), pair(0, 30) + pair(0, 31)},
      {keys::SampleRowKey("j", 4, 7), pair(0, 40)},
      {keys::SampleRowKey("j", 5, 0), pair(0, uint64_t{1} << 63)},
      {keys::SampleRowKey("j", -5, 0), pair(0, 50)},
      {std::string("j\0abc", 5), pair(0, 60)},
  };
  const std::vector<std::string> why = {
      "11 bytes are not whole (rank, time) pairs",
      "rank 0 is in it twice",
      "first rank 7 is not its lowest rank 0",
      "overflows int64",
      "iteration -5 is negative",
      "the key is not job, iteration and first rank",
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    KvWriteBatch bad;
    bad.Put(tables::kSampleRows, cases[i].first, cases[i].second);
    ASSERT_TRUE(kv_.Write(bad).ok());
    absl::Status s = store_.ScanSamples("j", [](uint32_t, int64_t, int64_t) {});
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << i;
    EXPECT_THAT(s.message(), ::testing::HasSubstr(why[i])) << i;
    EXPECT_THAT(s.message(), ::testing::HasSubstr("row of job 'j' under key \"j\\x00")) << i;
    std::vector<DamagedRow> damaged;
    int sound = 0;
    ASSERT_TRUE(store_
                    .ScanSamples(
                        "j", [&](uint32_t, int64_t, int64_t) { ++sound; }, &damaged)
                    .ok());
    EXPECT_EQ(sound, 2) << i;
    ASSERT_EQ(damaged.size(), 1u) << i;
    EXPECT_EQ(damaged[0].key, cases[i].first);
    EXPECT_THAT(damaged[0].why, ::testing::HasSubstr(why[i]));
    KvWriteBatch undo;
    undo.Delete(tables::kSampleRows, cases[i].first);
    ASSERT_TRUE(kv_.Write(undo).ok());
  }
  // A legacy row with trailing bytes is damaged too, and names its table.
  KvWriteBatch legacy;
  legacy.Put(tables::kLegacySamples, keys::LegacySampleKey("j", 0, 9), pair(0, 9));
  ASSERT_TRUE(kv_.Write(legacy).ok());
  absl::Status s = store_.ScanSamples("j", [](uint32_t, int64_t, int64_t) {});
  EXPECT_THAT(s.message(), ::testing::HasSubstr("table samples: row under key"));
  EXPECT_THAT(s.message(), ::testing::HasSubstr("not one 8-byte time"));
  StoreTxn move;
  std::vector<DamagedRow> damaged;
  ASSERT_TRUE(store_.MoveLegacySamples(&move, &damaged).ok());
  EXPECT_EQ(damaged.size(), 1u);
}

// A legacy row moved onto a key the new table already holds (a store written by this version,
// then an earlier one, then this one): merged, nothing lost, the new table's sample winning.
TEST_F(ControllerStoreTest, MovedLegacySamplesMergeWithARowUnderTheSameKey) {
  StoreTxn txn;
  txn.PutSampleRow("j", 10, std::vector<RankSample>{{0, 100}, {1, 101}});
  ASSERT_TRUE(store_.Commit(&txn).ok());
  KvWriteBatch old;
  for (uint32_t rank : {0u, 2u}) {
    std::string v;
    keys::AppendU64(&v, 900 + rank);
    old.Put(tables::kLegacySamples, keys::LegacySampleKey("j", rank, 10), v);
  }
  ASSERT_TRUE(kv_.Write(old).ok());
  StoreTxn move;
  ASSERT_TRUE(store_.MoveLegacySamples(&move).ok());
  ASSERT_TRUE(store_.Commit(&move).ok());
  std::set<std::tuple<uint32_t, int64_t, int64_t>> seen;
  ASSERT_TRUE(
      store_.ScanSamples("j", [&](uint32_t r, int64_t it, int64_t ns) { seen.emplace(r, it, ns); })
          .ok());
  EXPECT_EQ(seen, (std::set<std::tuple<uint32_t, int64_t, int64_t>>{
                      {0u, 10, 100}, {1u, 10, 101}, {2u, 10, 902}}));
}

TEST_F(ControllerStoreTest, CorruptRecordIsDataLoss) {
  KvWriteBatch bad;
  bad.Put(tables::kEvents, keys::EventKey(1), "\xff\xff\xff");
  ASSERT_TRUE(kv_.Write(bad).ok());
  EXPECT_EQ(store_.LoadEvents().status().code(), absl::StatusCode::kDataLoss);
}

falcon::v1::DirectiveRecord DirectiveWithAcks(const std::string& job, uint64_t id, int acks) {
  falcon::v1::DirectiveRecord r;
  r.mutable_directive()->set_job(job);
  r.mutable_directive()->set_directive_id(id);
  r.mutable_directive()->mutable_pause()->set_max_duration_ns(5);
  r.mutable_rollback()->mutable_resume();
  r.set_issued_time_ns(11);
  r.set_state(falcon::v1::DirectiveRecord::STATE_REJECTED);
  r.set_event_id(3);
  r.set_deliveries(2);
  r.set_last_delivery_time_ns(12);
  r.set_state_reason("rank 1 rejected it");
  r.set_rollback_directive_id(id + 1);
  for (int i = 0; i < acks; ++i) {
    falcon::v1::DirectiveAck* a = r.add_acks();
    a->set_directive_id(id);
    a->set_job(job);
    a->set_rank(static_cast<uint32_t>((i * 7919) % 1000));  // Arrival order is not rank order.
    a->set_status(falcon::v1::ACK_STATUS_APPLIED);
  }
  return r;
}

size_t Rows(const KvStore& kv, const char* table) {
  size_t n = 0;
  EXPECT_TRUE(kv.Scan(table, "", [&](absl::string_view, absl::string_view) {
                  ++n;
                  return true;
                }).ok());
  return n;
}

TEST_F(ControllerStoreTest, ADirectivesRowHoldsNoAcksAndEachAckHasItsOwnRow) {
  const falcon::v1::DirectiveRecord r = DirectiveWithAcks("j", 3, 300);  // Positions > 255.
  StoreTxn txn;
  txn.PutDirectiveWithAcks(r);
  txn.PutDirectiveWithAcks(DirectiveWithAcks("j", 4, 2));
  txn.PutDirectiveWithAcks(DirectiveWithAcks("j2", 3, 1));  // Same id, another job.
  txn.PutDirective(DirectiveWithAcks("k", 1, 0));
  ASSERT_TRUE(store_.Commit(&txn).ok());
  EXPECT_EQ(Rows(kv_, tables::kDirectives), 4u);
  EXPECT_EQ(Rows(kv_, tables::kDirectiveAcks), 303u);
  absl::StatusOr<std::string> row = kv_.Get(tables::kDirectives, keys::DirectiveKey("j", 3));
  ASSERT_TRUE(row.ok());
  falcon::v1::DirectiveRecord head;
  ASSERT_TRUE(head.ParseFromString(*row));
  falcon::v1::DirectiveRecord expected_head = r;
  expected_head.clear_acks();
  EXPECT_EQ(head.SerializeAsString(), expected_head.SerializeAsString())
      << "every field but the acks";

  auto loaded = store_.LoadDirectives();
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ASSERT_EQ(loaded->size(), 4u);
  EXPECT_EQ(loaded->at(0).SerializeAsString(), r.SerializeAsString()) << "acks in arrival order";
  EXPECT_EQ(loaded->at(1).acks_size(), 2);
  EXPECT_EQ(loaded->at(2).acks_size(), 1);
  EXPECT_EQ(loaded->at(3).acks_size(), 0);

  // An ack replaced in place and one appended: two rows written, the record's row untouched.
  falcon::v1::DirectiveRecord changed = r;
  changed.mutable_acks(5)->set_status(falcon::v1::ACK_STATUS_REJECTED);
  *changed.add_acks() = changed.acks(0);
  txn.PutDirectiveAck("j", 3, 5, changed.acks(5));
  txn.PutDirectiveAck("j", 3, 300, changed.acks(300));
  EXPECT_EQ(txn.size(), 2u);
  ASSERT_TRUE(store_.Commit(&txn).ok());
  EXPECT_EQ(store_.LoadDirectives()->at(0).SerializeAsString(), changed.SerializeAsString());

  // Deleting a directive deletes its acks, no other directive's.
  txn.DeleteDirective("j", 3);
  ASSERT_TRUE(store_.Commit(&txn).ok());
  EXPECT_EQ(Rows(kv_, tables::kDirectives), 3u);
  EXPECT_EQ(Rows(kv_, tables::kDirectiveAcks), 3u);
  txn.DeleteJobRows(tables::kDirectives, "j");
  txn.DeleteJobRows(tables::kDirectiveAcks, "j");
  ASSERT_TRUE(store_.Commit(&txn).ok());
  loaded = store_.LoadDirectives();
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ASSERT_EQ(loaded->size(), 2u);
  EXPECT_EQ(loaded->at(0).directive().job(), "j2");
  EXPECT_EQ(loaded->at(0).acks_size(), 1);
  EXPECT_EQ(Rows(kv_, tables::kDirectiveAcks), 1u);
}

TEST_F(ControllerStoreTest, ADirectiveStoredWithItsAcksInsideLoadsAsItIsAndIsStoredAgainInRows) {
  // As an earlier version stored it.
  const falcon::v1::DirectiveRecord r = DirectiveWithAcks("j", 3, 5);
  KvWriteBatch earlier;
  earlier.Put(tables::kDirectives, keys::DirectiveKey("j", 3), r.SerializeAsString());
  ASSERT_TRUE(kv_.Write(earlier).ok());
  auto loaded = store_.LoadDirectives();  // No rewrite: nothing staged.
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->at(0).SerializeAsString(), r.SerializeAsString());

  StoreTxn rewrite;
  loaded = store_.LoadDirectives(&rewrite);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->at(0).SerializeAsString(), r.SerializeAsString());
  EXPECT_EQ(rewrite.size(), 6u);
  ASSERT_TRUE(store_.Commit(&rewrite).ok());
  falcon::v1::DirectiveRecord head;
  ASSERT_TRUE(head.ParseFromString(*kv_.Get(tables::kDirectives, keys::DirectiveKey("j", 3))));
  EXPECT_EQ(head.acks_size(), 0);
  EXPECT_EQ(Rows(kv_, tables::kDirectiveAcks), 5u);
  StoreTxn again;
  EXPECT_EQ(store_.LoadDirectives(&again)->at(0).SerializeAsString(), r.SerializeAsString());
  EXPECT_TRUE(again.empty()) << "today's form is not stored again";
}

TEST_F(ControllerStoreTest, ABadAckRowIsDataLossNamingItsKey) {
  const auto load_error = [&](KvWriteBatch damage) {
    InMemoryKvStore kv(ControllerStore::TableNames());
    ControllerStore store(&kv, &clock_);
    StoreTxn copy;
    copy.PutDirectiveWithAcks(DirectiveWithAcks("llm", 7, 3));
    EXPECT_TRUE(store.Commit(&copy).ok());
    EXPECT_TRUE(kv.Write(damage).ok());
    absl::StatusOr<std::vector<falcon::v1::DirectiveRecord>> loaded = store.LoadDirectives();
    EXPECT_EQ(loaded.status().code(), absl::StatusCode::kDataLoss) << loaded.status();
    return std::string(loaded.status().message());
  };
  KvWriteBatch garbage;
  garbage.Put(tables::kDirectiveAcks, keys::DirectiveAckKey("llm", 7, 1), "\xff\xff\xff");
  EXPECT_EQ(load_error(garbage),
            "table directive_acks: row job=llm directive=7 position=1 does not parse");
  KvWriteBatch lost;
  lost.Delete(tables::kDirectiveAcks, keys::DirectiveAckKey("llm", 7, 1));
  EXPECT_EQ(load_error(lost),
            "table directive_acks: row job=llm directive=7 position=2 follows 1 acks of its "
            "directive (an ack row is lost)");
  KvWriteBatch orphan;
  orphan.Put(tables::kDirectiveAcks, keys::DirectiveAckKey("llm", 8, 0), "");
  EXPECT_EQ(load_error(orphan),
            "table directive_acks: row job=llm directive=8 position=0 is an ack of a directive "
            "not stored");
  KvWriteBatch malformed;
  malformed.Put(tables::kDirectiveAcks, "llm", "");
  EXPECT_EQ(load_error(malformed), "table directive_acks: key \"llm\" is malformed");
  KvWriteBatch bad_row;
  bad_row.Put(tables::kDirectives, keys::DirectiveKey("llm", 7), "\xff\xff\xff");
  EXPECT_EQ(load_error(bad_row), "table directives: row job=llm directive=7 does not parse");
}

TEST_F(ControllerStoreTest, FailedCommitIsReportedToObserver) {
  kv_.FailWritesForTest(absl::UnavailableError("disk gone"));
  StoreTxn txn;
  v1::MetaRecord meta;
  txn.PutMeta(meta);
  EXPECT_EQ(store_.Commit(&txn).code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(failures_, 1);
}

int64_t SampleOf(const ControllerStore& store, int64_t iteration) {
  int64_t got = -1;
  EXPECT_TRUE(store
                  .ScanSamples("j",
                               [&](uint32_t, int64_t it, int64_t ns) {
                                 if (it == iteration) got = ns;
                               })
                  .ok());
  return got;
}

TEST_F(ControllerStoreTest, FailedCommitsAreKeptAndStoredInOrderOnceTheStoreRecovers) {
  StoreTxn ok;
  ok.PutSampleRow("j", 1, std::vector<RankSample>{{0, 10}});
  ASSERT_TRUE(store_.Commit(&ok).ok());
  kv_.FailWritesForTest(absl::UnavailableError("No space left on device"));
  StoreTxn first;
  first.PutSampleRow("j", 2, std::vector<RankSample>{{0, 20}});
  first.PutSampleRow("j", 3, std::vector<RankSample>{{0, 30}});
  EXPECT_EQ(store_.Commit(&first).code(), absl::StatusCode::kUnavailable);
  EXPECT_FALSE(store_.healthy());
  StoreTxn second;  // Made while failed: kept behind the first, never written ahead of it.
  second.PutSampleRow("j", 3, std::vector<RankSample>{{0, 31}});
  second.TrimSamples("j", 2);
  EXPECT_EQ(store_.Commit(&second).code(), absl::StatusCode::kUnavailable);
  const int64_t writes = kv_.write_count();
  EXPECT_EQ(store_.Sync().code(), absl::StatusCode::kUnavailable);  // Still full.
  kv_.FailWritesForTest(absl::OkStatus());
  // At most one recovery attempt per retry interval.
  EXPECT_EQ(store_.Sync().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(kv_.write_count(), writes);
  clock_.Advance(absl::Seconds(1));
  ASSERT_TRUE(store_.Sync().ok());
  EXPECT_TRUE(store_.healthy());
  EXPECT_FALSE(store_.has_unsynced());
  EXPECT_EQ(kv_.write_count(), writes + 1);  // Both kept commits in one atomic write.
  EXPECT_EQ(SampleOf(store_, 1), -1);        // Trimmed by the second.
  EXPECT_EQ(SampleOf(store_, 2), 20);
  EXPECT_EQ(SampleOf(store_, 3), 31);
}

TEST_F(ControllerStoreTest, FailedSyncKeepsTheUnsyncedCommitsForTheRecovery) {
  StoreTxn txn;
  txn.PutSampleRow("j", 5, std::vector<RankSample>{{0, 50}});
  ASSERT_TRUE(store_.Commit(&txn).ok());
  EXPECT_TRUE(store_.has_unsynced());
  kv_.FailSyncsForTest(absl::UnavailableError("fsync: I/O error"));
  EXPECT_EQ(store_.Sync().code(), absl::StatusCode::kUnavailable);
  EXPECT_FALSE(store_.healthy());
  kv_.FailSyncsForTest(absl::OkStatus());
  clock_.Advance(absl::Seconds(1));
  const int64_t writes = kv_.write_count();
  ASSERT_TRUE(store_.Sync().ok());
  EXPECT_EQ(kv_.write_count(), writes + 1);  // Written again: a failed sync may have lost it.
  EXPECT_EQ(SampleOf(store_, 5), 50);
}

TEST(ControllerStoreRocksDbTest, OpensWithItsTables) {
  RocksDbOptions options;
  options.path = std::string(std::getenv("TEST_TMPDIR")) + "/cs_db";
  auto kv = RocksDbKvStore::Open(options, ControllerStore::TableNames());
  ASSERT_TRUE(kv.ok()) << kv.status();
  common::FakeClock clock;
  ControllerStore store(kv->get(), &clock);
  StoreTxn txn;
  txn.PutSampleRow("j", 5, std::vector<RankSample>{{3, 42}});
  ASSERT_TRUE(store.Commit(&txn).ok());
  int64_t got = 0;
  ASSERT_TRUE(store.ScanSamples("j", [&](uint32_t, int64_t, int64_t ns) { got = ns; }).ok());
  EXPECT_EQ(got, 42);
}

}  // namespace
}  // namespace falcon::controller::store
