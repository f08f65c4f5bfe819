#include "controller/store/rocksdb_kv_store.h"

#include <glog/logging.h>
#include <rocksdb/db.h>
#include <rocksdb/env.h>
#include <rocksdb/options.h>
#include <rocksdb/transaction_log.h>
#include <rocksdb/write_batch.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <fstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"

namespace falcon::controller::store {

// RocksDB's info log goes to glog instead of a LOG file in the data directory: that file fills up
// with the disk, and Debian's RocksDB 7.8 (built with assertions) aborts the process on the next
// line after a failed append. Warnings and errors are also kept, so that a failed open can say
// which file RocksDB found damaged ("<file>: dropping 32 bytes; Corruption: checksum mismatch").
class RocksDbLogger : public rocksdb::Logger {
 public:
  RocksDbLogger()
      : rocksdb::Logger(VLOG_IS_ON(2) ? rocksdb::InfoLogLevel::INFO_LEVEL
                                      : rocksdb::InfoLogLevel::WARN_LEVEL) {}

  using rocksdb::Logger::Logv;
  void Logv(const char* format, va_list ap) override {
    Logv(rocksdb::InfoLogLevel::INFO_LEVEL, format, ap);
  }
  void LogHeader(const char* format, va_list ap) override {
    Logv(rocksdb::InfoLogLevel::INFO_LEVEL, format, ap);
  }
  void Logv(const rocksdb::InfoLogLevel level, const char* format, va_list ap) override {
    if (level < GetInfoLogLevel()) return;
    char buf[1024];
    std::vsnprintf(buf, sizeof(buf), format, ap);
    absl::string_view line = absl::StripTrailingAsciiWhitespace(buf);
    if (level < rocksdb::InfoLogLevel::WARN_LEVEL || level == rocksdb::InfoLogLevel::HEADER_LEVEL) {
      VLOG(2) << "rocksdb: " << line;
      return;
    }
    if (level == rocksdb::InfoLogLevel::WARN_LEVEL) {
      VLOG(1) << "rocksdb: " << line;
    } else {
      LOG(WARNING) << "rocksdb: " << line;
    }
    absl::MutexLock lock(&mu_);
    recent_.emplace_back(line);
    if (recent_.size() > kKept) recent_.pop_front();
  }

  // Warnings and errors logged since the last call.
  std::vector<std::string> Take() {
    absl::MutexLock lock(&mu_);
    std::vector<std::string> out(recent_.begin(), recent_.end());
    recent_.clear();
    return out;
  }

 private:
  static constexpr size_t kKept = 8;
  absl::Mutex mu_;
  std::deque<std::string> recent_ ABSL_GUARDED_BY(mu_);
};

namespace {

// The commit counter lives in its own column family, written with every batch: a store that
// recovers fewer commits than its commit record says were durable has lost data.
constexpr char kCommitFamily[] = "falcon_commit";
constexpr char kCommitKey[] = "commit";

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

std::string EncodeCommit(uint64_t v) {
  std::string out(8, '\0');
  for (int i = 7; i >= 0; --i, v >>= 8) out[static_cast<size_t>(i)] = static_cast<char>(v & 0xff);
  return out;
}

uint64_t DecodeCommit(absl::string_view s) {
  uint64_t v = 0;
  for (char c : s) v = (v << 8) | static_cast<uint8_t>(c);
  return v;
}

bool FileSize(const std::string& path, uint64_t* size) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return false;
  *size = static_cast<uint64_t>(st.st_size);
  return true;
}

// The MANIFEST that CURRENT names ("" when CURRENT is missing or empty).
std::string ManifestOf(const std::string& dir) {
  std::ifstream in(absl::StrCat(dir, "/CURRENT"));
  std::string name;
  std::getline(in, name);
  return name.empty() ? "" : absl::StrCat(dir, "/", name);
}

bool Contains(const std::vector<std::string>& v, absl::string_view s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

void AddUnique(std::vector<std::string>* v, const std::string& s) {
  if (!Contains(*v, s)) v->push_back(s);
}

// A failed open, with what RocksDB logged about it (which names the damaged file).
absl::Status WithDetail(absl::Status s, const std::vector<std::string>& lines) {
  if (s.ok() || lines.empty()) return s;
  return absl::Status(s.code(),
                      absl::StrCat(s.message(), " [RocksDB: ", absl::StrJoin(lines, " | "), "]"));
}

}  // namespace

absl::StatusOr<std::unique_ptr<RocksDbKvStore>> RocksDbKvStore::Open(
    const RocksDbOptions& options, const std::vector<std::string>& tables) {
  if (options.path.empty()) return absl::InvalidArgumentError("data_dir: must not be empty");
  if (tables.empty()) return absl::InvalidArgumentError("tables: must not be empty");
  for (const std::string& t : tables) {
    if (t == rocksdb::kDefaultColumnFamilyName || t == kCommitFamily) {
      return absl::InvalidArgumentError(absl::StrCat("tables: '", t, "' is reserved"));
    }
  }
  std::error_code ec;
  std::filesystem::create_directories(options.path, ec);  // RocksDB's own attempt logs an error.
  std::unique_ptr<RocksDbKvStore> store(new RocksDbKvStore(options, tables));
  absl::MutexLock lock(&store->mu_);
  absl::StatusOr<std::optional<CommitRecord>> record = store->record_file_.Read();
  if (!record.ok() && !absl::IsDataLoss(record.status())) return record.status();
  bool log_damage = false;
  absl::Status s = record.ok() ? store->OpenChecked(*record, /*point_in_time=*/false,
                                                    /*check_commits=*/true, &log_damage)
                               : record.status();
  if (s.ok() && options.repair) {
    // Asked to repair: also find a damaged block that only a read would meet.
    if (rocksdb::Status v = store->db_->VerifyChecksum(); !v.ok()) {
      s = FromRocks(v, "verifying table files");
      store->CloseDb();
    }
  }
  if (absl::IsDataLoss(s) && options.repair) {
    s = store->Repair(s, log_damage, record.ok() ? *record : std::nullopt);
  }
  if (!s.ok()) return s;
  if (absl::Status w = store->WriteRecord(store->last_figures_, /*durable=*/true); !w.ok()) {
    return w;
  }
  return store;
}

RocksDbKvStore::RocksDbKvStore(RocksDbOptions options, std::vector<std::string> tables)
    : options_(std::move(options)),
      requested_tables_(std::move(tables)),
      logger_(std::make_shared<RocksDbLogger>()),
      record_file_(options_.path) {}

RocksDbKvStore::~RocksDbKvStore() {
  absl::MutexLock lock(&mu_);
  if (db_ != nullptr && broken_.ok()) {
    // Everything into table files, so that a damaged log or MANIFEST found at the next start can
    // still be repaired without loss (RepairDB cannot map a log's records to their tables).
    rocksdb::FlushOptions flush;
    rocksdb::Status s = db_->Flush(flush, handles_);
    if (s.ok()) s = db_->SyncWAL();
    absl::Status w = s.ok() ? WriteRecord(last_figures_, /*durable=*/true) : FromRocks(s, "flush");
    if (!w.ok()) {
      LOG(WARNING) << "store not closed cleanly path=" << options_.path << " error=\""
                   << w.message() << "\"";
    }
  }
  CloseDb();
}

absl::Status RocksDbKvStore::OpenChecked(const std::optional<CommitRecord>& record,
                                         bool point_in_time, bool check_commits, bool* log_damage) {
  bool ignored = false;
  if (log_damage == nullptr) log_damage = &ignored;
  *log_damage = false;
  logger_->Take();
  const std::string& dir = options_.path;
  const std::string manifest = ManifestOf(dir);
  const std::string record_path = record_file_.path();
  std::string wal_path;
  bool wal_present = false;
  if (record.has_value()) {
    if (check_commits && !record->wal.empty()) {
      wal_path = absl::StrCat(dir, "/", record->wal);
      uint64_t size = 0;
      wal_present = FileSize(wal_path, &size);
      if (wal_present && size < record->wal_bytes) {
        *log_damage = true;
        return absl::DataLossError(absl::StrCat(
            "write-ahead log ", wal_path, " is ", size, " bytes, but ", record->wal_bytes,
            " bytes of it were synced (commit record ", record_path, "): it was truncated"));
      }
    }
    if (manifest.empty()) {
      return absl::DataLossError(absl::StrCat(dir, "/CURRENT is missing or empty, but the store ",
                                              "holds commit ", record->commit, " (commit record ",
                                              record_path, ")"));
    }
  }

  rocksdb::Options o;
  o.create_if_missing = !record.has_value();
  o.create_missing_column_families = true;
  o.paranoid_checks = true;
  o.wal_recovery_mode = point_in_time ? rocksdb::WALRecoveryMode::kPointInTimeRecovery
                                      : rocksdb::WALRecoveryMode::kTolerateCorruptedTailRecords;
  o.atomic_flush = true;
  o.info_log = logger_;
  o.write_buffer_size = options_.write_buffer_size_bytes;

  std::vector<std::string> existing;
  if (record.has_value() || !manifest.empty()) {
    rocksdb::Status ls = rocksdb::DB::ListColumnFamilies(o, dir, &existing);
    if (!ls.ok()) {
      absl::Status s = FromRocks(ls, absl::StrCat("reading ", manifest));
      if (record.has_value() && (ls.IsNotFound() || ls.IsIOError())) {
        s = absl::DataLossError(s.message());
      }
      return WithDetail(s, logger_->Take());
    }
  }
  if (record.has_value()) {
    for (const std::string& t : record->tables) {
      if (!Contains(existing, t)) {
        return absl::DataLossError(absl::StrCat(
            manifest, " lists no table '", t, "', which commit ", record->commit,
            " had (commit record ", record_path, "): the MANIFEST was truncated or damaged"));
      }
    }
  }

  rocksdb::ColumnFamilyOptions cf_options;
  cf_options.write_buffer_size = options_.write_buffer_size_bytes;
  logger_->Take();

  // Check before the read-write open: that open deletes the table files a damaged MANIFEST no
  // longer lists, so what a repair could have saved would be gone.
  // No commit record beside a store that counts its commits: this version writes the record at
  // every open, so it was deleted, and without it damage would pass unseen (an earlier version's
  // store has no commit table). Only a counter above 0 says so: a store created and killed before
  // its first record holds none.
  const bool record_lost =
      !record.has_value() && check_commits && Contains(existing, kCommitFamily);
  if ((record.has_value() || record_lost) && check_commits && Contains(existing, kCommitFamily)) {
    std::vector<rocksdb::ColumnFamilyDescriptor> ro_families;
    for (const std::string& n : existing) ro_families.emplace_back(n, cf_options);
    std::vector<rocksdb::ColumnFamilyHandle*> ro_handles;
    rocksdb::DB* ro_raw = nullptr;
    rocksdb::Status rs = rocksdb::DB::OpenForReadOnly(o, dir, ro_families, &ro_handles, &ro_raw);
    if (!rs.ok()) {
      absl::Status s = FromRocks(rs, absl::StrCat("opening RocksDB at ", dir));
      if (rs.IsNotFound()) s = absl::DataLossError(s.message());
      const std::vector<std::string> lines = logger_->Take();
      for (const std::string& line : lines) {
        if (line.find(".log: dropping") != std::string::npos) *log_damage = true;
      }
      return WithDetail(s, lines);
    }
    std::unique_ptr<rocksdb::DB> ro(ro_raw);
    size_t commit_index = 0;
    for (size_t i = 0; i < existing.size(); ++i) {
      if (existing[i] == kCommitFamily) commit_index = i;
    }
    std::string value;
    rocksdb::Status gs =
        ro->Get(rocksdb::ReadOptions(), ro_handles[commit_index], kCommitKey, &value);
    for (rocksdb::ColumnFamilyHandle* h : ro_handles) ro->DestroyColumnFamilyHandle(h);
    ro->Close();
    if (!gs.ok() && !gs.IsNotFound()) return FromRocks(gs, "reading the commit counter");
    const uint64_t held = gs.ok() ? DecodeCommit(value) : 0;
    if (record_lost) {
      if (held > 0) {
        return absl::DataLossError(absl::StrCat(
            "the commit record ", record_path, " is missing, but the store holds commit ", held,
            " (written by a controller that keeps the record): without it a truncated log or "
            "MANIFEST would go unnoticed; restore the file, or start with --repair to check "
            "the store and write a new one"));
      }
    } else if (held < record->commit) {
      // After a clean close the log is empty and everything is in table files.
      *log_damage = wal_present && record->wal_bytes > 0;
      const std::string where =
          *log_damage
              ? absl::StrCat("the write-ahead log ", wal_path, " lost its end, or ", manifest,
                             " or a table file it lists lost them")
              : absl::StrCat(manifest, " or a table file it lists lost them (the MANIFEST was ",
                             "truncated or damaged)");
      return WithDetail(absl::DataLossError(absl::StrCat(
                            "the store holds commit ", held, " but commit ", record->commit,
                            " was durable (commit record ", record_path, "): ", where)),
                        logger_->Take());
    }
  } else if (record.has_value() && check_commits && record->commit > 0) {
    return absl::DataLossError(absl::StrCat(manifest, " lists no table '", kCommitFamily,
                                            "', which commit ", record->commit,
                                            " had (commit record ", record_path, ")"));
  }

  std::vector<std::string> names = {rocksdb::kDefaultColumnFamilyName, kCommitFamily};
  for (const std::string& n : existing) AddUnique(&names, n);
  for (const std::string& t : requested_tables_) AddUnique(&names, t);
  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
  for (const std::string& n : names) descriptors.emplace_back(n, cf_options);
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* raw = nullptr;
  rocksdb::Status s = rocksdb::DB::Open(o, dir, descriptors, &handles, &raw);
  if (!s.ok()) {
    // A held LOCK file shows up as an IOError: another controller owns the directory.
    absl::Status st = FromRocks(s, absl::StrCat("opening RocksDB at ", dir));
    if (record.has_value() && s.IsNotFound()) st = absl::DataLossError(st.message());
    return WithDetail(st, logger_->Take());
  }
  db_.reset(raw);
  handles_ = std::move(handles);
  table_names_ = names;
  by_name_.clear();
  for (size_t i = 0; i < handles_.size(); ++i) by_name_[table_names_[i]] = handles_[i];
  std::string value;
  rocksdb::Status gs = db_->Get(rocksdb::ReadOptions(), handles_[1], kCommitKey, &value);
  if (!gs.ok() && !gs.IsNotFound()) {
    absl::Status st = FromRocks(gs, "reading the commit counter");
    CloseDb();
    return st;
  }
  commit_ = gs.ok() ? DecodeCommit(value) : 0;
  broken_ = absl::OkStatus();
  if (record.has_value()) last_figures_ = record->figures;
  return absl::OkStatus();
}

absl::Status RocksDbKvStore::Repair(const absl::Status& damage, bool log_damage,
                                    const std::optional<CommitRecord>& record) {
  RepairReport report;
  report.damage = std::string(damage.message());
  if (record.has_value()) {
    report.commits_before = record->commit;
    report.figures_before = record->figures;
  }
  LOG(WARNING) << "store damaged, repairing path=" << options_.path << " damage=\""
               << damage.message() << "\"";
  // 1. A damaged log: replayed up to its first damaged record, the state of an earlier commit. A
  //    table file the open cannot read fails it, and a damaged block is found by the verification.
  //    Not tried for other damage: the read-write open deletes the table files a damaged MANIFEST
  //    no longer lists, which RepairDB would have used.
  //    The commit record missing: the store opened as it is (a log replayed up to a damaged
  //    record, if any), checked block by block, and a new record written.
  absl::Status s = absl::DataLossError("not a damaged log");
  if (log_damage || !record.has_value()) {
    s = OpenChecked(record, /*point_in_time=*/true, /*check_commits=*/false);
  }
  if (s.ok()) {
    rocksdb::Status v = db_->VerifyChecksum();
    if (v.ok()) {
      report.method = record.has_value()
                          ? "point-in-time recovery of the write-ahead log"
                          : "opened without its commit record (its commits could not be checked "
                            "against it) and verified; a new record written";
    } else {
      s = FromRocks(v, "verifying table files");
      CloseDb();
    }
  }
  // 2. Rebuild the MANIFEST from the table files (RepairDB), then open what it found.
  if (!s.ok()) {
    LOG(WARNING) << "store repair runs RepairDB path=" << options_.path << " reason=\""
                 << s.message() << "\"";
    rocksdb::Options o;
    o.info_log = logger_;
    rocksdb::ColumnFamilyOptions cf_options;
    cf_options.write_buffer_size = options_.write_buffer_size_bytes;
    std::vector<std::string> names = {rocksdb::kDefaultColumnFamilyName, kCommitFamily};
    if (record.has_value()) {
      for (const std::string& t : record->tables) AddUnique(&names, t);
    }
    for (const std::string& t : requested_tables_) AddUnique(&names, t);
    std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
    for (const std::string& n : names) descriptors.emplace_back(n, cf_options);
    rocksdb::Status r = rocksdb::RepairDB(options_.path, o, descriptors, cf_options);
    if (!r.ok()) {
      return absl::DataLossError(absl::StrCat("repairing ", options_.path, " failed (",
                                              r.ToString(), "); the damage: ", damage.message()));
    }
    s = OpenChecked(std::nullopt, /*point_in_time=*/true, /*check_commits=*/false);
    if (!s.ok()) {
      return absl::DataLossError(absl::StrCat("opening ", options_.path, " after RepairDB failed (",
                                              s.message(), "); the damage: ", damage.message()));
    }
    report.method =
        absl::StrCat("RepairDB (files it could not use are kept in ", options_.path, "/lost)");
  }
  report.commits_after = commit_;
  last_figures_ = report.figures_before;
  LOG(WARNING) << "store repaired path=" << options_.path << " method=\"" << report.method
               << "\" commits_before=" << report.commits_before
               << " commits_after=" << report.commits_after;
  repair_ = std::move(report);
  return absl::OkStatus();
}

void RocksDbKvStore::CloseDb() {
  if (db_ == nullptr) return;
  for (rocksdb::ColumnFamilyHandle* h : handles_) {
    db_->DestroyColumnFamilyHandle(h).PermitUncheckedError();
  }
  handles_.clear();
  by_name_.clear();
  db_->Close().PermitUncheckedError();
  db_.reset();
}

absl::Status RocksDbKvStore::WriteRecord(const store::StoreFigures& figures, bool durable) {
  CommitRecord r;
  r.commit = commit_;
  for (const std::string& n : table_names_) {
    if (n != rocksdb::kDefaultColumnFamilyName && n != kCommitFamily) r.tables.push_back(n);
  }
  std::sort(r.tables.begin(), r.tables.end());
  r.figures = figures;
  std::unique_ptr<rocksdb::LogFile> wal;
  if (db_->GetCurrentWalFile(&wal).ok() && wal != nullptr) {
    std::string name = wal->PathName();
    const size_t slash = name.rfind('/');
    if (slash != std::string::npos) name = name.substr(slash + 1);
    r.wal = name;
    r.wal_bytes = wal->SizeFileBytes();
  }
  return record_file_.Write(std::move(r), durable);
}

rocksdb::ColumnFamilyHandle* RocksDbKvStore::Handle(absl::string_view table) const {
  if (table == rocksdb::kDefaultColumnFamilyName || table == kCommitFamily) return nullptr;
  auto it = by_name_.find(table);
  return it == by_name_.end() ? nullptr : it->second;
}

absl::Status RocksDbKvStore::Usable() const {
  if (!broken_.ok()) {
    return absl::UnavailableError(
        absl::StrCat("store needs recovery after a failure: ", broken_.message()));
  }
  if (db_ == nullptr) return absl::UnavailableError("store is closed");
  return absl::OkStatus();
}

uint64_t RocksDbKvStore::commit() const {
  absl::ReaderMutexLock lock(&mu_);
  return commit_;
}

absl::Status RocksDbKvStore::Write(const KvWriteBatch& batch) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = Usable(); !s.ok()) return s;
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
  rocksdb::Status s = wb.Put(handles_[1], kCommitKey, EncodeCommit(commit_ + 1));
  if (s.ok()) s = db_->Write(rocksdb::WriteOptions(), &wb);
  if (!s.ok()) {
    broken_ = FromRocks(s, "RocksDB write");
    return broken_;
  }
  ++commit_;
  return absl::OkStatus();
}

absl::Status RocksDbKvStore::Sync(const store::StoreFigures& figures) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = Usable(); !s.ok()) return s;
  if (options_.sync_writes) {
    rocksdb::Status s = db_->SyncWAL();
    if (!s.ok()) {
      broken_ = FromRocks(s, "RocksDB log sync");
      return broken_;
    }
  }
  last_figures_ = figures;
  if (!options_.sync_writes) return absl::OkStatus();
  return WriteRecord(figures, /*durable=*/false);
}

absl::Status RocksDbKvStore::Recover() {
  absl::MutexLock lock(&mu_);
  if (broken_.ok() && db_ != nullptr) return absl::OkStatus();
  CloseDb();
  absl::StatusOr<std::optional<CommitRecord>> record = record_file_.Read();
  if (!record.ok()) {
    broken_ = record.status();
    return broken_;
  }
  absl::Status s = OpenChecked(*record, /*point_in_time=*/false, /*check_commits=*/true);
  if (s.ok()) s = WriteRecord(last_figures_, /*durable=*/true);
  if (!s.ok()) {
    CloseDb();
    broken_ = s;
    return s;
  }
  LOG(INFO) << "store reopened path=" << options_.path << " commit=" << commit_;
  return absl::OkStatus();
}

absl::StatusOr<std::string> RocksDbKvStore::Get(absl::string_view table,
                                                absl::string_view key) const {
  absl::ReaderMutexLock lock(&mu_);
  if (db_ == nullptr) return absl::UnavailableError("store is closed");
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
  absl::ReaderMutexLock lock(&mu_);
  if (db_ == nullptr) return absl::UnavailableError("store is closed");
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

absl::Status RocksDbKvStore::Flush() {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = Usable(); !s.ok()) return s;
  // The log switches to a new file; the commit record's log may then be gone at the next open,
  // which it allows (its data is in table files), as after any memtable flush.
  rocksdb::FlushOptions fo;
  fo.wait = true;
  return FromRocks(db_->Flush(fo, handles_), "RocksDB flush");
}

std::vector<std::string> RocksDbKvStore::Tables() const {
  absl::ReaderMutexLock lock(&mu_);
  std::vector<std::string> out;
  for (const std::string& n : table_names_) {
    if (n != rocksdb::kDefaultColumnFamilyName && n != kCommitFamily) out.push_back(n);
  }
  return out;
}

}  // namespace falcon::controller::store
