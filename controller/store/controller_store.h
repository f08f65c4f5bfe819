// Typed tables over a KvStore (as Ray's GcsTableStorage over its StoreClient): one table (RocksDB
// column family) per kind of record. Writes are staged in a StoreTxn and committed atomically, so
// a telemetry batch's dedup mark and everything it changed land together ("write before acting").
//
// Durability: Commit writes (visible at once, survives a crash of the process); Sync makes every
// commit so far durable (KvStore::Sync), and only then may the controller say so (acknowledge a
// batch). Commits are kept in memory until synced. When a commit or sync fails the store is
// failed (healthy() false): the kept commits, and any commit made while failed, are written again,
// ahead of anything later and in one atomic batch, by the next Sync once the KvStore recovers. So
// the store always ends up holding exactly the controller's in-memory state, and a failed write
// is never skipped over by a later one.
//
// Tables and keys (keys.h):
//   jobs        job name                    -> controller.v1.JobRecord (without its parts;
//                                              stores of earlier versions have them inside)
//   job_parts   job \0 agent id             -> controller.v1.AgentJob (one agent's part of a job)
//   events      event id                    -> controller.v1.EventRecord
//   directives  job \0 directive id         -> falcon.v1.DirectiveRecord (without its acks;
//                                              stores of earlier versions have them inside)
//   directive_acks  job \0 directive id \0 position
//                                           -> falcon.v1.DirectiveAck (one ack of a directive;
//                                              position: its index in DirectiveRecord.acks, the
//                                              order acks were first received; a rank may have
//                                              two, see DirectiveIssuer::OnAck)
//   settings    job name ("" = defaults)    -> falcon.v1.Settings
//   history     job \0 bucket iteration     -> falcon.v1.HistoryPoint (downsampled job series)
//   sample_rows job \0 iteration first rank -> (uint32 rank, int64 iteration time ns) pairs,
//                                              big-endian: one agent batch's ranks of one
//                                              iteration (the recent window of the job, replayed
//                                              into the detectors after a restart)
//   samples     job \0 rank iteration       -> int64 iteration time ns: written by earlier
//                                              versions, moved to sample_rows at start-up
//   agents      agent id                    -> controller.v1.AgentRecord
//   meta        "meta"                      -> controller.v1.MetaRecord
//   audit       audit id                    -> falcon.v1.AuditRecord (mutating Control calls)
//
// Thread-safety: as thread-safe as the KvStore (both implementations are); StoreTxn is not.
#ifndef FALCON_CONTROLLER_STORE_CONTROLLER_STORE_H_
#define FALCON_CONTROLLER_STORE_CONTROLLER_STORE_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/clock.h"
#include "controller/store/kv_store.h"
#include "controller/store/records.pb.h"
#include "proto/falcon/v1/control.pb.h"

namespace falcon::controller::store {

namespace tables {
inline constexpr char kJobs[] = "jobs";
inline constexpr char kJobParts[] = "job_parts";
inline constexpr char kEvents[] = "events";
inline constexpr char kDirectives[] = "directives";
inline constexpr char kDirectiveAcks[] = "directive_acks";
inline constexpr char kSettings[] = "settings";
inline constexpr char kHistory[] = "history";
inline constexpr char kSampleRows[] = "sample_rows";
// Written by versions before sample_rows (one row per rank and iteration): moved to sample_rows
// at start-up (ControllerStore::MoveLegacySamples).
inline constexpr char kLegacySamples[] = "samples";
inline constexpr char kAgents[] = "agents";
inline constexpr char kMeta[] = "meta";
inline constexpr char kAudit[] = "audit";
}  // namespace tables

// A rank's iteration time (ns) in a sample row.
struct RankSample {
  uint32_t rank = 0;
  int64_t time_ns = 0;
};

// A stored row that does not parse, skipped by a scan asked to go on (--store_repair).
struct DamagedRow {
  const char* table = "";
  std::string key;
  std::string why;  // Names the table, the job (when known), the key and what is wrong.
};

// Staged writes; commit with ControllerStore::Commit. Later puts of the same key win.
class StoreTxn {
 public:
  void PutJob(const v1::JobRecord& record);
  void PutJobPart(const std::string& job, const v1::AgentJob& part);
  void DeleteJobPart(const std::string& job, const std::string& agent_id);
  void PutEvent(const v1::EventRecord& record);
  // The directive's row: the record without its acks (each has a row of its own,
  // PutDirectiveAck), so that storing an ack or a state change costs O(1), not O(acks).
  void PutDirective(const falcon::v1::DirectiveRecord& record);
  // One ack of a directive at `position`, its index in DirectiveRecord.acks.
  void PutDirectiveAck(const std::string& job, uint64_t directive_id, uint32_t position,
                       const falcon::v1::DirectiveAck& ack);
  // PutDirective and PutDirectiveAck of every ack: O(acks).
  void PutDirectiveWithAcks(const falcon::v1::DirectiveRecord& record);
  void PutSettings(const falcon::v1::Settings& settings);
  void PutHistory(const std::string& job, const falcon::v1::HistoryPoint& point);
  // One row of a job's iteration times of `iteration` (an agent batch's ranks; no rank twice):
  // keyed by its first rank, so rows of one iteration from different agents do not collide (a
  // rank's sample of an iteration is stored once). One row per batch rather than per rank: a
  // fleet-sized job writes 16,384 samples a second (docs/fleet.md).
  void PutSampleRow(const std::string& job, int64_t iteration, absl::Span<const RankSample> row);
  // Deletes the job's samples with iteration < `before_iteration` (one range).
  void TrimSamples(const std::string& job, int64_t before_iteration);
  // Deletes every sample of the job.
  void DeleteJobSamples(const std::string& job);
  void PutAgent(const v1::AgentRecord& record);
  void PutMeta(const v1::MetaRecord& record);
  void PutAudit(const falcon::v1::AuditRecord& record);

  // Deletes (retention): a job's record and parts, its settings overrides, every row of `table`
  // keyed by the job (directives, directive_acks, history, samples: "<job>\0..."), one event, one
  // directive with its acks.
  void DeleteJob(const std::string& job);
  void DeleteSettings(const std::string& job);
  void DeleteJobRows(const char* table, const std::string& job);
  void DeleteEvent(uint64_t event_id);
  void DeleteDirective(const std::string& job, uint64_t directive_id);
  void DeleteAudit(uint64_t audit_id);

  bool empty() const { return batch_.empty(); }
  size_t size() const { return batch_.size(); }
  KvWriteBatch& batch() { return batch_; }

 private:
  KvWriteBatch batch_;
};

class ControllerStore {
 public:
  // Called after every commit (and, set_sync_observer, every sync) with its latency and status
  // (for metrics); may be empty.
  using CommitObserver = std::function<void(absl::Duration latency, const absl::Status& status)>;
  // What the store holds, recorded with each sync (KvStore::Sync).
  using FiguresFn = std::function<store::StoreFigures()>;

  // `kv` and `clock` must outlive the store. The KvStore must have been opened with TableNames().
  ControllerStore(KvStore* kv, const common::Clock* clock, CommitObserver observer = nullptr);

  // Names of the tables to open the KvStore with.
  static std::vector<std::string> TableNames();

  void set_sync_observer(CommitObserver observer) { sync_observer_ = std::move(observer); }
  void set_figures(FiguresFn figures) { figures_ = std::move(figures); }
  // Least time between two recovery attempts of a failed store. Default: 1 s.
  void set_retry_interval(absl::Duration interval) { retry_interval_ = interval; }

  // Writes `txn` atomically and clears it; durable after the next successful Sync. On failure,
  // and while the store is failed, the writes are kept (see the file comment). Errors:
  // kUnavailable while failed; those of KvStore::Write (kInvalidArgument for an unknown table: a
  // bug, not kept).
  absl::Status Commit(StoreTxn* txn);

  // Makes every commit so far durable. When the store is failed, first recovers it (at most once
  // per retry interval) and writes the kept commits again. OK: everything committed is durable
  // and the store is healthy. Errors: kUnavailable naming the failure.
  absl::Status Sync();

  // False from a failed commit or sync until a Sync succeeds.
  bool healthy() const { return failure_.ok(); }
  // The failure while not healthy.
  const absl::Status& failure() const { return failure_; }
  // Commits written (or kept) since the last successful Sync.
  bool has_unsynced() const { return !unsynced_.empty(); }

  // Loaders. Errors: kDataLoss when a stored record does not parse; KvStore errors otherwise.
  absl::StatusOr<std::vector<v1::JobRecord>> LoadJobs() const;
  // Every job's parts as (job, part), by job.
  absl::StatusOr<std::vector<std::pair<std::string, v1::AgentJob>>> LoadJobParts() const;
  absl::StatusOr<std::vector<v1::EventRecord>> LoadEvents() const;
  // Every directive with its acks: those inside its row (stores of earlier versions), then its
  // ack rows in position order. A row of an earlier version loads as it is and, when `rewrite`
  // is given, is staged there in today's form (PutDirectiveWithAcks). Errors: kDataLoss naming
  // the key (job, directive id, position) of a row that does not parse, of an ack row whose
  // directive is not stored, or whose position is not the next one of its directive.
  absl::StatusOr<std::vector<falcon::v1::DirectiveRecord>> LoadDirectives(
      StoreTxn* rewrite = nullptr) const;
  absl::StatusOr<std::vector<falcon::v1::Settings>> LoadSettings() const;
  absl::StatusOr<std::vector<v1::AgentRecord>> LoadAgents() const;
  // In audit id order.
  absl::StatusOr<std::vector<falcon::v1::AuditRecord>> LoadAudit() const;
  // The meta record; a default one when none is stored yet.
  absl::StatusOr<v1::MetaRecord> LoadMeta() const;
  // History points of `job` with bucket iteration >= from_iteration, in iteration order.
  absl::StatusOr<std::vector<falcon::v1::HistoryPoint>> LoadHistory(const std::string& job,
                                                                    int64_t from_iteration) const;
  // Whether `table` (directives, directive_acks, history or samples) has a row keyed by `job`.
  // Errors: KvStore's.
  absl::StatusOr<bool> HasJobRows(const char* table, const std::string& job) const;
  // KvStore::Flush (after large deletes).
  absl::Status Flush() { return kv_->Flush(); }

  // Calls fn(rank, iteration, time_ns) for every stored sample of `job`: sample_rows in
  // iteration order, then rows of the legacy samples table not yet moved (rank by rank).
  // A malformed row (a key that does not parse or names another job, a negative iteration, a
  // value that is not whole (rank, time) pairs, a rank twice, a time past int64, a key's first
  // rank that is not the row's lowest) is, with `damaged` null, DATA_LOSS naming the table, the
  // job, the key and what is wrong; otherwise it is skipped and appended to `damaged`.
  // Errors: KvStore's; DATA_LOSS as above.
  absl::Status ScanSamples(const std::string& job,
                           const std::function<void(uint32_t, int64_t, int64_t)>& fn,
                           std::vector<DamagedRow>* damaged = nullptr) const;
  // Stages the legacy samples table's rows as sample rows (one per job and iteration, without
  // the ranks the iteration's sample rows already hold: theirs win) and the deletion of that
  // table's rows, so that one commit moves them; a no-op on a store without any. Returns how many
  // samples it read. Malformed rows and errors: as ScanSamples (malformed legacy rows are deleted
  // with the table; malformed sample rows of a moved iteration are appended to `damaged`).
  absl::StatusOr<int64_t> MoveLegacySamples(StoreTxn* txn,
                                            std::vector<DamagedRow>* damaged = nullptr) const;

 private:
  // Calls fn(job, rank, iteration, time_ns) for the legacy samples table's rows of `job` (every
  // job when empty). Malformed rows and errors: as ScanSamples.
  absl::Status ScanLegacySamples(
      const std::string& job,
      const std::function<void(const std::string&, uint32_t, int64_t, int64_t)>& fn,
      std::vector<DamagedRow>* damaged) const;

  KvStore* const kv_;
  const common::Clock* const clock_;
  CommitObserver observer_;
  CommitObserver sync_observer_;
  FiguresFn figures_;
  absl::Duration retry_interval_ = absl::Seconds(1);
  std::vector<KvWriteBatch> unsynced_;  // Written or kept since the last successful Sync.
  absl::Status failure_;
  std::optional<int64_t> last_recovery_ns_;  // MonotonicNanos of the last recovery attempt.
};

}  // namespace falcon::controller::store

#endif  // FALCON_CONTROLLER_STORE_CONTROLLER_STORE_H_
