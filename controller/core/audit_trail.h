// The audit trail (docs/operations.md#authorization-and-audit): every call of a mutating Control
// RPC, allowed or refused, as a falcon.v1.AuditRecord, stored in the audit table and kept in
// memory for ListAudit. Bounded twice: the retention sweep drops records older than the retention
// period, and beyond kMaxRecords the oldest go with each append. Not thread-safe: controller
// loop only.
#ifndef FALCON_CONTROLLER_CORE_AUDIT_TRAIL_H_
#define FALCON_CONTROLLER_CORE_AUDIT_TRAIL_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <vector>

#include "absl/time/time.h"
#include "controller/store/controller_store.h"
#include "proto/falcon/v1/control.pb.h"

namespace falcon::controller::core {

class AuditTrail {
 public:
  // Most records kept (memory and store); a request text is at most kMaxRequestBytes, so the
  // trail holds at most about 25 MiB.
  static constexpr size_t kMaxRecords = 10000;
  static constexpr size_t kMaxRequestBytes = 2048;

  // The stored records (any order); ids continue after the largest.
  void Load(std::vector<falcon::v1::AuditRecord> records);

  // Gives `record` the next audit id, bounds its request text (kMaxRequestBytes, cut at a UTF-8
  // boundary with "..."), stages its write and the deletes of what goes beyond kMaxRecords in
  // `txn`, and keeps it. Returns the record as stored.
  const falcon::v1::AuditRecord& Append(falcon::v1::AuditRecord record, store::StoreTxn* txn);

  // Up to `max` records with audit id < `before_id` (0 = from the newest), newest first.
  std::vector<const falcon::v1::AuditRecord*> ListBefore(uint64_t before_id, size_t max) const;

  // The ids of up to `max` records older than `cutoff` (oldest first), for the retention sweep.
  std::vector<uint64_t> Expired(absl::Time cutoff, size_t max) const;
  // Drops the oldest `n` records from memory (after their deletes committed).
  void ForgetOldest(size_t n);

  size_t size() const { return records_.size(); }

 private:
  std::deque<falcon::v1::AuditRecord> records_;  // Audit id order.
  uint64_t next_id_ = 1;
};

}  // namespace falcon::controller::core

#endif  // FALCON_CONTROLLER_CORE_AUDIT_TRAIL_H_
