#include "controller/store/rocksdb_kv_store.h"

#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <rocksdb/write_batch.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace falcon::controller::store {
namespace {

absl::Status FromRocks(const rocksdb::Status& s, absl::string_view what) {
  if (s.ok()) return absl::OkStatus();
  std::string msg = absl::StrCat(what, ": ", s.ToString());
  if (s.IsNotFound()) return absl::NotFoundError(msg);
  if (s.IsCorruption()) return absl::DataLossError(msg);
  if (s.IsInvalidArgument()) return absl::InvalidArgumentError(msg);
  if (s.IsIOError() || s.IsBusy() || s.IsTimedOut() || s.IsTryAgain()) {
    return absl::UnavailableError(msg);
  }
  return absl::InternalError(msg);
}

rocksdb::Slice ToSlice(absl::string_view s) { return rocksdb::Slice(s.data(), s.size()); }

}  // namespace

absl::StatusOr<std::unique_ptr<RocksDbKvStore>> RocksDbKvStore::Open(
    const RocksDbOptions& options, const std::vector<std::string>& tables) {
  if (options.path.empty()) return absl::InvalidArgumentError("data_dir: must not be empty");
  if (tables.empty()) return absl::InvalidArgumentError("tables: must not be empty");

  rocksdb::Options db_options;
  db_options.create_if_missing = true;
  db_options.create_missing_column_families = true;
  db_options.write_buffer_size = options.write_buffer_size_bytes;

  // Open every family that already exists plus the requested ones.
  std::vector<std::string> names = {rocksdb::kDefaultColumnFamilyName};
  std::vector<std::string> existing;
  if (rocksdb::DB::ListColumnFamilies(db_options, options.path, &existing).ok()) {
    for (const std::string& n : existing) {
      if (std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);
    }
  }
  for (const std::string& t : tables) {
    if (std::find(names.begin(), names.end(), t) == names.end()) names.push_back(t);
  }
  rocksdb::ColumnFamilyOptions cf_options;
  cf_options.write_buffer_size = options.write_buffer_size_bytes;
  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
  for (const std::string& n : names) descriptors.emplace_back(n, cf_options);

  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* raw = nullptr;
  rocksdb::Status s = rocksdb::DB::Open(db_options, options.path, descriptors, &handles, &raw);
  if (!s.ok()) {
    absl::Status st = FromRocks(s, absl::StrCat("opening RocksDB at ", options.path));
    // A held LOCK file shows up as an IOError: another controller owns the directory.
    return st;
  }
  return std::unique_ptr<RocksDbKvStore>(
      new RocksDbKvStore(options, std::unique_ptr<rocksdb::DB>(raw), std::move(handles), names));
}

RocksDbKvStore::RocksDbKvStore(RocksDbOptions options, std::unique_ptr<rocksdb::DB> db,
                               std::vector<rocksdb::ColumnFamilyHandle*> handles,
                               std::vector<std::string> table_names)
    : options_(std::move(options)),
      db_(std::move(db)),
      handles_(std::move(handles)),
      table_names_(std::move(table_names)) {
  for (size_t i = 0; i < handles_.size(); ++i) by_name_[table_names_[i]] = handles_[i];
}

RocksDbKvStore::~RocksDbKvStore() {
  for (rocksdb::ColumnFamilyHandle* h : handles_) {
    db_->DestroyColumnFamilyHandle(h).PermitUncheckedError();
  }
  handles_.clear();
  db_->Close().PermitUncheckedError();
}

rocksdb::ColumnFamilyHandle* RocksDbKvStore::Handle(absl::string_view table) const {
  if (table == rocksdb::kDefaultColumnFamilyName) return nullptr;
  auto it = by_name_.find(table);
  return it == by_name_.end() ? nullptr : it->second;
}

absl::Status RocksDbKvStore::Write(const KvWriteBatch& batch) {
  rocksdb::WriteBatch wb;
  for (const KvWriteBatch::Op& op : batch.ops()) {
    rocksdb::ColumnFamilyHandle* h = Handle(op.table);
    if (h == nullptr)
      return absl::InvalidArgumentError(absl::StrCat("unknown table '", op.table, "'"));
    rocksdb::Status s;
    switch (op.kind) {
      case KvWriteBatch::Op::Kind::kPut:
        s = wb.Put(h, ToSlice(op.key), ToSlice(op.value));
        break;
      case KvWriteBatch::Op::Kind::kDelete:
        s = wb.Delete(h, ToSlice(op.key));
        break;
      case KvWriteBatch::Op::Kind::kDeleteRange:
        if (op.key < op.value) s = wb.DeleteRange(h, ToSlice(op.key), ToSlice(op.value));
        break;
    }
    if (!s.ok()) return FromRocks(s, "building write batch");
  }
  rocksdb::WriteOptions wo;
  wo.sync = options_.sync_writes;
  return FromRocks(db_->Write(wo, &wb), "RocksDB write");
}

absl::StatusOr<std::string> RocksDbKvStore::Get(absl::string_view table,
                                                absl::string_view key) const {
  rocksdb::ColumnFamilyHandle* h = Handle(table);
  if (h == nullptr) return absl::InvalidArgumentError(absl::StrCat("unknown table '", table, "'"));
  std::string value;
  rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), h, ToSlice(key), &value);
  if (s.IsNotFound()) return absl::NotFoundError(absl::StrCat(table, ": key not found"));
  if (!s.ok()) return FromRocks(s, "RocksDB get");
  return value;
}

absl::Status RocksDbKvStore::ScanRange(absl::string_view table, absl::string_view begin,
                                       absl::string_view end, const KvScanFn& fn) const {
  rocksdb::ColumnFamilyHandle* h = Handle(table);
  if (h == nullptr) return absl::InvalidArgumentError(absl::StrCat("unknown table '", table, "'"));
  rocksdb::ReadOptions ro;
  rocksdb::Slice upper = ToSlice(end);
  if (!end.empty()) ro.iterate_upper_bound = &upper;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(ro, h));
  for (it->Seek(ToSlice(begin)); it->Valid(); it->Next()) {
    absl::string_view key(it->key().data(), it->key().size());
    if (!fn(key, absl::string_view(it->value().data(), it->value().size()))) break;
  }
  return FromRocks(it->status(), "RocksDB scan");
}

std::vector<std::string> RocksDbKvStore::Tables() const {
  std::vector<std::string> out;
  for (const std::string& n : table_names_) {
    if (n != rocksdb::kDefaultColumnFamilyName) out.push_back(n);
  }
  return out;
}

}  // namespace falcon::controller::store
