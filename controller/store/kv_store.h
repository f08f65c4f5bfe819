// The untyped storage layer under the controller's typed tables (controller_store.h): named
// tables of ordered byte-string keys and values, atomic multi-table write batches, and prefix
// scans. Two implementations: RocksDbKvStore (one column family per table; rocksdb_kv_store.h)
// and InMemoryKvStore (tests; in_memory_kv_store.h). Shaped after Ray's StoreClient.
#ifndef FALCON_CONTROLLER_STORE_KV_STORE_H_
#define FALCON_CONTROLLER_STORE_KV_STORE_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace falcon::controller::store {

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

  // Applies every op of `batch` atomically (all or none).
  // Errors: kInvalidArgument for an unknown table; kUnavailable / kInternal on I/O failure.
  virtual absl::Status Write(const KvWriteBatch& batch) = 0;

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
};

}  // namespace falcon::controller::store

#endif  // FALCON_CONTROLLER_STORE_KV_STORE_H_
