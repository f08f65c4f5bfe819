// The untyped storage layer under the controller's typed tables (controller_store.h): named
// tables of ordered byte-string keys and values, atomic multi-table write batches, and prefix
// scans. Two implementations: RocksDbKvStore (one column family per table; rocksdb_kv_store.h)
// and InMemoryKvStore (tests; in_memory_kv_store.h). Shaped after Ray's StoreClient.
#ifndef FALCON_CONTROLLER_STORE_KV_STORE_H_
#define FALCON_CONTROLLER_STORE_KV_STORE_H_

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace falcon::controller::store {

// Figures of what the store holds (e.g. {"jobs", 505}), recorded outside the database with each
// KvStore::Sync so that a repair can say what damage lost. Names are [a-z_]+.
using StoreFigures = std::vector<std::pair<std::string, uint64_t>>;

// A set of puts and deletes applied atomically by KvStore::Write, in order. Not thread-safe.
class KvWriteBatch {
 public:
  struct Op {
    enum class Kind { kPut, kDelete, kDeleteRange };
    Kind kind = Kind::kPut;
    std::string table;
    std::string key;
    std::string value;  // Empty for deletes; the end key (exclusive) for kDeleteRange.
  };

  void Put(absl::string_view table, absl::string_view key, absl::string_view value);
  void Delete(absl::string_view table, absl::string_view key);
  // Deletes every key in [begin, end).
  void DeleteRange(absl::string_view table, absl::string_view begin, absl::string_view end);
  void Append(KvWriteBatch&& other);
  void Clear() {
    ops_.clear();
    bytes_ = 0;
  }

  const std::vector<Op>& ops() const { return ops_; }
  bool empty() const { return ops_.empty(); }
  size_t size() const { return ops_.size(); }
  // Sum of key and value sizes, for metrics and limits.
  uint64_t bytes() const { return bytes_; }

 private:
  std::vector<Op> ops_;
  uint64_t bytes_ = 0;
};

// The smallest key greater than every key starting with `prefix`; "" when there is none.
std::string PrefixSuccessor(absl::string_view prefix);

// Called for each entry of a scan in key order; return false to stop early.
using KvScanFn = std::function<bool(absl::string_view key, absl::string_view value)>;

// Tables are fixed when the store is opened. Implementations are thread-safe.
class KvStore {
 public:
  virtual ~KvStore() = default;

  // Applies every op of `batch` atomically (all or none). The write is visible at once and
  // survives a crash of this process, but it is durable (survives a power loss) only after the
  // next successful Sync. After a failed Write or Sync the store refuses writes until Recover.
  // Errors: kInvalidArgument for an unknown table; kUnavailable / kInternal on I/O failure.
  virtual absl::Status Write(const KvWriteBatch& batch) = 0;

  // Makes every successful Write so far durable, and records `figures` with that point
  // (RocksDbKvStore: in its commit record). Errors: kUnavailable / kInternal on I/O failure,
  // and while a failed Write or Sync has not been followed by a successful Recover.
  virtual absl::Status Sync(const store::StoreFigures& figures) = 0;

  // After a failed Write or Sync: brings the store back to what it holds durably, ready for
  // writes (RocksDbKvStore reopens the database). A write that failed, and any write not synced
  // since, may or may not be in the store afterwards: write them again. OK when nothing failed.
  // Errors: those of opening the store (kUnavailable while the disk is still full; kDataLoss).
  virtual absl::Status Recover() = 0;

  // The value under `key`. Errors: kNotFound when absent; kInvalidArgument for an unknown table.
  virtual absl::StatusOr<std::string> Get(absl::string_view table, absl::string_view key) const = 0;

  // Calls `fn` for every key in [begin, end) in byte-wise key order; an empty `end` means no
  // upper bound. Errors: kInvalidArgument for an unknown table; kInternal on I/O failure.
  virtual absl::Status ScanRange(absl::string_view table, absl::string_view begin,
                                 absl::string_view end, const KvScanFn& fn) const = 0;

  // Calls `fn` for every key that starts with `prefix` ("" = all), in key order.
  absl::Status Scan(absl::string_view table, absl::string_view prefix, const KvScanFn& fn) const;

  // Names of the tables this store was opened with.
  virtual std::vector<std::string> Tables() const = 0;

  // Frees memory still held for written (and deleted) entries by writing them out; called after
  // large deletes. The default has nothing to do (a store that frees on delete). Errors: I/O.
  virtual absl::Status Flush() { return absl::OkStatus(); }
};

}  // namespace falcon::controller::store

#endif  // FALCON_CONTROLLER_STORE_KV_STORE_H_
