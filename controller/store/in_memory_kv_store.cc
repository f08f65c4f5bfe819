#include "controller/store/in_memory_kv_store.h"

#include "absl/strings/str_cat.h"

namespace falcon::controller::store {

InMemoryKvStore::InMemoryKvStore(const std::vector<std::string>& tables) {
  for (const std::string& t : tables) tables_[t];
}

absl::Status InMemoryKvStore::Write(const KvWriteBatch& batch) {
  absl::MutexLock lock(&mu_);
  if (!broken_.ok()) {
    return absl::UnavailableError(
        absl::StrCat("store needs recovery after a failure: ", broken_.message()));
  }
  if (!fail_writes_.ok()) {
    broken_ = fail_writes_;
    return fail_writes_;
  }
  for (const KvWriteBatch::Op& op : batch.ops()) {
    if (tables_.find(op.table) == tables_.end()) {
      return absl::InvalidArgumentError(absl::StrCat("unknown table '", op.table, "'"));
    }
  }
  for (const KvWriteBatch::Op& op : batch.ops()) {
    Table& table = tables_.find(op.table)->second;
    if (op.kind == KvWriteBatch::Op::Kind::kPut) {
      table.insert_or_assign(op.key, op.value);
    } else if (op.kind == KvWriteBatch::Op::Kind::kDelete) {
      auto it = table.find(op.key);
      if (it != table.end()) table.erase(it);
    } else if (op.key < op.value) {
      table.erase(table.lower_bound(op.key), table.lower_bound(op.value));
    }
  }
  ++write_count_;
  return absl::OkStatus();
}

absl::StatusOr<std::string> InMemoryKvStore::Get(absl::string_view table,
                                                 absl::string_view key) const {
  absl::MutexLock lock(&mu_);
  auto t = tables_.find(table);
  if (t == tables_.end())
    return absl::InvalidArgumentError(absl::StrCat("unknown table '", table, "'"));
  auto it = t->second.find(key);
  if (it == t->second.end()) return absl::NotFoundError(absl::StrCat(table, ": key not found"));
  return it->second;
}

absl::Status InMemoryKvStore::ScanRange(absl::string_view table, absl::string_view begin,
                                        absl::string_view end, const KvScanFn& fn) const {
  // Copy the range first so `fn` runs without the lock held.
  std::vector<std::pair<std::string, std::string>> entries;
  {
    absl::MutexLock lock(&mu_);
    auto t = tables_.find(table);
    if (t == tables_.end()) {
      return absl::InvalidArgumentError(absl::StrCat("unknown table '", table, "'"));
    }
    for (auto it = t->second.lower_bound(begin);
         it != t->second.end() && (end.empty() || it->first < end); ++it) {
      entries.emplace_back(it->first, it->second);
    }
  }
  for (const auto& [key, value] : entries) {
    if (!fn(key, value)) break;
  }
  return absl::OkStatus();
}

std::vector<std::string> InMemoryKvStore::Tables() const {
  absl::MutexLock lock(&mu_);
  std::vector<std::string> names;
  for (const auto& [name, table] : tables_) names.push_back(name);
  return names;
}

absl::Status InMemoryKvStore::Sync(const store::StoreFigures& figures) {
  absl::MutexLock lock(&mu_);
  if (!broken_.ok()) {
    return absl::UnavailableError(
        absl::StrCat("store needs recovery after a failure: ", broken_.message()));
  }
  if (!fail_syncs_.ok()) {
    broken_ = fail_syncs_;
    return fail_syncs_;
  }
  ++sync_count_;
  last_figures_ = figures;
  return absl::OkStatus();
}

absl::Status InMemoryKvStore::Recover() {
  absl::MutexLock lock(&mu_);
  if (broken_.ok()) return absl::OkStatus();
  if (!fail_writes_.ok()) return fail_writes_;
  broken_ = absl::OkStatus();
  return absl::OkStatus();
}

void InMemoryKvStore::FailWritesForTest(absl::Status status) {
  absl::MutexLock lock(&mu_);
  fail_writes_ = std::move(status);
}

void InMemoryKvStore::FailSyncsForTest(absl::Status status) {
  absl::MutexLock lock(&mu_);
  fail_syncs_ = std::move(status);
}

int64_t InMemoryKvStore::write_count() const {
  absl::MutexLock lock(&mu_);
  return write_count_;
}

int64_t InMemoryKvStore::sync_count() const {
  absl::MutexLock lock(&mu_);
  return sync_count_;
}

store::StoreFigures InMemoryKvStore::last_figures() const {
  absl::MutexLock lock(&mu_);
  return last_figures_;
}

}  // namespace falcon::controller::store
