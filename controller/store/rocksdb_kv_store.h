// KvStore on an embedded RocksDB database: one column family per table, atomic WriteBatch
// across families. Thread-safe (RocksDB is).
#ifndef FALCON_CONTROLLER_STORE_ROCKSDB_KV_STORE_H_
#define FALCON_CONTROLLER_STORE_ROCKSDB_KV_STORE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "controller/store/kv_store.h"

namespace rocksdb {
class DB;
class ColumnFamilyHandle;
}  // namespace rocksdb

namespace falcon::controller::store {

struct RocksDbOptions {
  // Directory of the database; created when missing. REQUIRES: non-empty.
  std::string path;
  // fsync the write-ahead log on every Write. false survives a process crash but not a power
  // loss; true costs one fsync per telemetry batch. Default: false. Not reloadable.
  bool sync_writes = false;
  // Memory for memtables per column family. Default: 16 MiB. Not reloadable.
  uint64_t write_buffer_size_bytes = 16ull << 20;
};

class RocksDbKvStore : public KvStore {
 public:
  // Opens (or creates) the database with exactly `tables` (plus RocksDB's "default" family, which
  // is unused). Existing families not in `tables` are opened and left alone.
  // Errors: kInvalidArgument for an empty path or table list; kUnavailable when the directory is
  // locked by another process or cannot be created; kDataLoss on corruption.
  static absl::StatusOr<std::unique_ptr<RocksDbKvStore>> Open(
      const RocksDbOptions& options, const std::vector<std::string>& tables);
  ~RocksDbKvStore() override;

  absl::Status Write(const KvWriteBatch& batch) override;
  absl::StatusOr<std::string> Get(absl::string_view table, absl::string_view key) const override;
  absl::Status ScanRange(absl::string_view table, absl::string_view begin, absl::string_view end,
                         const KvScanFn& fn) const override;
  std::vector<std::string> Tables() const override;

 private:
  RocksDbKvStore(RocksDbOptions options, std::unique_ptr<rocksdb::DB> db,
                 std::vector<rocksdb::ColumnFamilyHandle*> handles,
                 std::vector<std::string> table_names);
  rocksdb::ColumnFamilyHandle* Handle(absl::string_view table) const;

  const RocksDbOptions options_;
  std::unique_ptr<rocksdb::DB> db_;
  std::vector<rocksdb::ColumnFamilyHandle*> handles_;  // Owned; destroyed before db_.
  std::vector<std::string> table_names_;
  absl::flat_hash_map<std::string, rocksdb::ColumnFamilyHandle*> by_name_;
};

}  // namespace falcon::controller::store

#endif  // FALCON_CONTROLLER_STORE_ROCKSDB_KV_STORE_H_
