#include "controller/core/audit_trail.h"

#include <gtest/gtest.h>

#include <string>

namespace falcon::controller::core {
namespace {

falcon::v1::AuditRecord Call(int64_t time_ns, const std::string& request = "job: \"a\"") {
  falcon::v1::AuditRecord r;
  r.set_time_ns(time_ns);
  r.set_identity("alice");
  r.set_method("SetSettings");
  r.set_request(request);
  r.set_result("OK");
  return r;
}

TEST(AuditTrailTest, NumbersRecordsAndListsNewestFirstInPages) {
  AuditTrail trail;
  store::StoreTxn txn;
  for (int i = 1; i <= 5; ++i) EXPECT_EQ(trail.Append(Call(i), &txn).audit_id(), uint64_t(i));
  EXPECT_EQ(txn.size(), 5u);
  auto page = trail.ListBefore(0, 2);
  ASSERT_EQ(page.size(), 2u);
  EXPECT_EQ(page[0]->audit_id(), 5u);
  EXPECT_EQ(page[1]->audit_id(), 4u);
  page = trail.ListBefore(4, 10);
  ASSERT_EQ(page.size(), 3u);
  EXPECT_EQ(page[0]->audit_id(), 3u);
  EXPECT_EQ(page[2]->audit_id(), 1u);
}

TEST(AuditTrailTest, IdsContinueAfterLoad) {
  AuditTrail trail;
  std::vector<falcon::v1::AuditRecord> stored = {Call(2), Call(1)};
  stored[0].set_audit_id(8);
  stored[1].set_audit_id(3);
  trail.Load(stored);
  store::StoreTxn txn;
  EXPECT_EQ(trail.Append(Call(3), &txn).audit_id(), 9u);
  EXPECT_EQ(trail.ListBefore(0, 10).back()->audit_id(), 3u);
}

TEST(AuditTrailTest, BoundsRequestTextAtACharacter) {
  AuditTrail trail;
  store::StoreTxn txn;
  std::string big(AuditTrail::kMaxRequestBytes - 4, 'x');
  big += "\xc3\xa9\xc3\xa9\xc3\xa9";  // "ééé" across the bound.
  const auto& r = trail.Append(Call(1, big), &txn);
  EXPECT_LE(r.request().size(), AuditTrail::kMaxRequestBytes);
  EXPECT_EQ(r.request().substr(r.request().size() - 3), "...");
  EXPECT_EQ(r.request().substr(0, r.request().size() - 3), std::string(big.size() - 6, 'x'));
}

TEST(AuditTrailTest, KeepsAtMostMaxRecordsDroppingTheOldest) {
  AuditTrail trail;
  store::StoreTxn txn;
  for (size_t i = 0; i < AuditTrail::kMaxRecords + 2; ++i) trail.Append(Call(1), &txn);
  EXPECT_EQ(trail.size(), AuditTrail::kMaxRecords);
  // Every put plus the two deletes of the oldest.
  EXPECT_EQ(txn.size(), AuditTrail::kMaxRecords + 4);
  EXPECT_EQ(trail.ListBefore(0, AuditTrail::kMaxRecords).back()->audit_id(), 3u);
}

TEST(AuditTrailTest, ExpiredAreTheOldestBeforeTheCutoff) {
  AuditTrail trail;
  store::StoreTxn txn;
  for (int i = 1; i <= 4; ++i) trail.Append(Call(i * 100), &txn);
  EXPECT_EQ(trail.Expired(absl::FromUnixNanos(250), 10), (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(trail.Expired(absl::FromUnixNanos(250), 1), (std::vector<uint64_t>{1}));
  trail.ForgetOldest(2);
  EXPECT_EQ(trail.size(), 2u);
  EXPECT_TRUE(trail.Expired(absl::FromUnixNanos(250), 10).empty());
}

}  // namespace
}  // namespace falcon::controller::core
