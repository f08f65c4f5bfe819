#include "controller/core/audit_trail.h"

#include <algorithm>
#include <string>
#include <utility>

namespace falcon::controller::core {
namespace {

// `text` cut to at most `max` bytes (with "..." ending it), never inside a UTF-8 sequence.
void Bound(std::string* text, size_t max) {
  if (text->size() <= max) return;
  size_t n = max - 3;
  while (n > 0 && (static_cast<unsigned char>((*text)[n]) & 0xC0) == 0x80) --n;
  text->resize(n);
  text->append("...");
}

}  // namespace

void AuditTrail::Load(std::vector<falcon::v1::AuditRecord> records) {
  std::sort(records.begin(), records.end(),
            [](const auto& a, const auto& b) { return a.audit_id() < b.audit_id(); });
  records_.assign(std::make_move_iterator(records.begin()), std::make_move_iterator(records.end()));
  next_id_ = records_.empty() ? 1 : records_.back().audit_id() + 1;
}

const falcon::v1::AuditRecord& AuditTrail::Append(falcon::v1::AuditRecord record,
                                                  store::StoreTxn* txn) {
  record.set_audit_id(next_id_++);
  Bound(record.mutable_request(), kMaxRequestBytes);
  txn->PutAudit(record);
  while (records_.size() >= kMaxRecords) {
    txn->DeleteAudit(records_.front().audit_id());
    records_.pop_front();
  }
  records_.push_back(std::move(record));
  return records_.back();
}

std::vector<const falcon::v1::AuditRecord*> AuditTrail::ListBefore(uint64_t before_id,
                                                                   size_t max) const {
  std::vector<const falcon::v1::AuditRecord*> out;
  auto end = records_.end();
  if (before_id != 0) {
    end = std::lower_bound(records_.begin(), records_.end(), before_id,
                           [](const auto& r, uint64_t id) { return r.audit_id() < id; });
  }
  for (auto it = end; it != records_.begin() && out.size() < max;) {
    --it;
    out.push_back(&*it);
  }
  return out;
}

std::vector<uint64_t> AuditTrail::Expired(absl::Time cutoff, size_t max) const {
  std::vector<uint64_t> out;
  const int64_t cutoff_ns = absl::ToUnixNanos(cutoff);
  for (const auto& r : records_) {
    if (out.size() >= max || r.time_ns() > cutoff_ns) break;
    out.push_back(r.audit_id());
  }
  return out;
}

void AuditTrail::ForgetOldest(size_t n) {
  n = std::min(n, records_.size());
  records_.erase(records_.begin(), records_.begin() + static_cast<std::ptrdiff_t>(n));
}

}  // namespace falcon::controller::core
