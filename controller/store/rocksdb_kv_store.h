// KvStore on an embedded RocksDB database: one column family per table, atomic WriteBatch
// across families. Thread-safe.
//
// Durability: Write appends to RocksDB's write-ahead log without an fsync (the write survives a
// crash of the process); Sync fsyncs the log (then it survives a power loss) and updates the
// commit record (commit_record.h). Writes are never made with WriteOptions.sync: after a failed
// log append, Debian's RocksDB 7.8 (built with assertions) aborts the process on the next sync of
// that log, so after any failed Write or Sync the store refuses writes until Recover closes and
// reopens the database, which replays what the log holds.
//
// Damage is never silent. The database opens with paranoid checks and
// WALRecoveryMode::kTolerateCorruptedTailRecords: a damaged record anywhere in the log (a flipped
// bit) fails the open, while an incomplete record at the very end, which is what a crash or a
// full disk leaves in the middle of an unsynced write, is dropped (kAbsoluteConsistency would
// refuse to start after every such crash; kPointInTimeRecovery, RocksDB's default, silently drops
// everything after a damaged record). What RocksDB cannot see, the commit record catches: a log cut
// shorter than its synced size, a MANIFEST that lost column families (RocksDB would recreate them
// empty), a missing CURRENT (RocksDB would create a new, empty database), or any store that
// recovers fewer commits than were durable. Every such open fails with kDataLoss naming the file.
//
// Repair (RocksDbOptions::repair): a damaged log is replayed up to its first damaged record
// (point-in-time recovery: the state of some earlier commit); a damaged MANIFEST, CURRENT or table
// file (or a log whose replay fails) is rebuilt from the table files by rocksdb::RepairDB, which
// keeps what it cannot use in <data_dir>/lost (it cannot map a log's records to their tables, so
// what only the log held is lost; a clean close flushes everything into table files first). With
// the repair flag the table files are also verified block by block at the start. RepairReport
// says what was done and what the damage cost.
#ifndef FALCON_CONTROLLER_STORE_ROCKSDB_KV_STORE_H_
#define FALCON_CONTROLLER_STORE_ROCKSDB_KV_STORE_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "controller/store/commit_record.h"
#include "controller/store/kv_store.h"

namespace rocksdb {
class DB;
class ColumnFamilyHandle;
}  // namespace rocksdb

namespace falcon::controller::store {

class RocksDbLogger;

// What a repair did and lost (RocksDbOptions::repair).
struct RepairReport {
  std::string damage;           // Why the store did not open as it was (the kDataLoss message).
  std::string method;           // "point-in-time recovery of the write-ahead log" or "RepairDB".
  uint64_t commits_before = 0;  // Durable commits per the commit record (0: no record).
  uint64_t commits_after = 0;   // Commits the repaired store holds.
  store::StoreFigures figures_before;  // Recorded with the last durable commit (empty: no record).
};

struct RocksDbOptions {
  // Directory of the database; created when missing. REQUIRES: non-empty.
  std::string path;
  // Sync fsyncs the write-ahead log, so a batch acknowledged after it survives a power loss.
  // false: Sync only hands the log to the operating system (it survives a crash of the controller,
  // not of the machine) and the commit record is updated only on a clean close. Default: true.
  // Not reloadable.
  bool sync_writes = true;
  // Memory for memtables per column family. Default: 16 MiB. Not reloadable.
  uint64_t write_buffer_size_bytes = 16ull << 20;
  // Open a damaged store by repairing it (see the file comment) instead of failing with
  // kDataLoss. Default: false (an operator's decision: --store_repair).
  bool repair = false;
};

class RocksDbKvStore : public KvStore {
 public:
  // Opens (or creates) the database with exactly `tables` (plus RocksDB's "default" family, which
  // holds the commit counter). Existing families not in `tables` are opened and left alone.
  // Errors: kInvalidArgument for an empty path or table list; kUnavailable when the directory is
  // locked by another process or cannot be created; kDataLoss naming the damaged file (see the
  // file comment) unless options.repair.
  static absl::StatusOr<std::unique_ptr<RocksDbKvStore>> Open(
      const RocksDbOptions& options, const std::vector<std::string>& tables);
  // Syncs the log and writes the commit record durably (unless a failure is pending), then
  // closes the database.
  ~RocksDbKvStore() override;

  absl::Status Write(const KvWriteBatch& batch) override ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status Sync(const store::StoreFigures& figures) override ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status Recover() override ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<std::string> Get(absl::string_view table, absl::string_view key) const override
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status ScanRange(absl::string_view table, absl::string_view begin, absl::string_view end,
                         const KvScanFn& fn) const override ABSL_LOCKS_EXCLUDED(mu_);
  std::vector<std::string> Tables() const override;
  // Flushes every memtable to disk (their memory is freed); automatic compactions then drop the
  // deleted entries from the files.
  absl::Status Flush() override ABSL_LOCKS_EXCLUDED(mu_);

  // Set when this open repaired a damaged store.
  const std::optional<RepairReport>& repair_report() const { return repair_; }
  // Commits written so far (the counter in the database).
  uint64_t commit() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  explicit RocksDbKvStore(RocksDbOptions options, std::vector<std::string> tables);
  // Opens the database, checking it against the commit record (`repair`: as the repair path does,
  // see the file comment). On success db_, handles_ and commit_ are set.
  absl::Status OpenDb() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // `log_damage` (may be null) is set when a kDataLoss is in the write-ahead log (rather than
  // in the MANIFEST, CURRENT or a table file): the repair then replays the log up to it.
  absl::Status OpenChecked(const std::optional<CommitRecord>& record, bool point_in_time,
                           bool check_commits, bool* log_damage = nullptr)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status Repair(const absl::Status& damage, bool log_damage,
                      const std::optional<CommitRecord>& record) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CloseDb() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status WriteRecord(const store::StoreFigures& figures, bool durable)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  rocksdb::ColumnFamilyHandle* Handle(absl::string_view table) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  absl::Status Usable() const ABSL_SHARED_LOCKS_REQUIRED(mu_);

  const RocksDbOptions options_;
  const std::vector<std::string> requested_tables_;
  std::shared_ptr<RocksDbLogger> logger_;
  mutable absl::Mutex mu_;
  CommitRecordFile record_file_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<rocksdb::DB> db_ ABSL_GUARDED_BY(mu_);
  std::vector<rocksdb::ColumnFamilyHandle*> handles_ ABSL_GUARDED_BY(mu_);  // Owned.
  std::vector<std::string> table_names_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, rocksdb::ColumnFamilyHandle*> by_name_ ABSL_GUARDED_BY(mu_);
  uint64_t commit_ ABSL_GUARDED_BY(mu_) = 0;  // Last commit number written.
  absl::Status broken_ ABSL_GUARDED_BY(mu_);  // The failure that needs a Recover.
  store::StoreFigures last_figures_ ABSL_GUARDED_BY(mu_);
  std::optional<RepairReport> repair_;
};

}  // namespace falcon::controller::store

#endif  // FALCON_CONTROLLER_STORE_ROCKSDB_KV_STORE_H_
