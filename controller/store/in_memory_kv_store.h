// A KvStore held in memory (std::map per table), for tests and benchmarks. Sync makes nothing
// more durable; like RocksDbKvStore, a failed Write or Sync leaves the store refusing writes
// until a Recover succeeds. Thread-safe.
#ifndef FALCON_CONTROLLER_STORE_IN_MEMORY_KV_STORE_H_
#define FALCON_CONTROLLER_STORE_IN_MEMORY_KV_STORE_H_

#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "controller/store/kv_store.h"

namespace falcon::controller::store {

class InMemoryKvStore : public KvStore {
 public:
  explicit InMemoryKvStore(const std::vector<std::string>& tables);

  absl::Status Write(const KvWriteBatch& batch) override;
  absl::Status Sync(const store::StoreFigures& figures) override;
  absl::Status Recover() override;
  absl::StatusOr<std::string> Get(absl::string_view table, absl::string_view key) const override;
  absl::Status ScanRange(absl::string_view table, absl::string_view begin, absl::string_view end,
                         const KvScanFn& fn) const override;
  std::vector<std::string> Tables() const override;

  // Makes every later Write (and Recover) fail with `status`; OK lets the next Recover succeed.
  void FailWritesForTest(absl::Status status);
  // Makes every later Sync fail with `status` (OK restores normal operation).
  void FailSyncsForTest(absl::Status status);
  // Number of successful Write and Sync calls.
  int64_t write_count() const;
  int64_t sync_count() const;
  // Figures given to the last successful Sync.
  store::StoreFigures last_figures() const;

 private:
  using Table = std::map<std::string, std::string, std::less<>>;
  mutable absl::Mutex mu_;
  std::map<std::string, Table, std::less<>> tables_ ABSL_GUARDED_BY(mu_);
  absl::Status fail_writes_ ABSL_GUARDED_BY(mu_);
  absl::Status fail_syncs_ ABSL_GUARDED_BY(mu_);
  absl::Status broken_ ABSL_GUARDED_BY(mu_);  // The failure that needs a Recover.
  int64_t write_count_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t sync_count_ ABSL_GUARDED_BY(mu_) = 0;
  store::StoreFigures last_figures_ ABSL_GUARDED_BY(mu_);
};

}  // namespace falcon::controller::store

#endif  // FALCON_CONTROLLER_STORE_IN_MEMORY_KV_STORE_H_
