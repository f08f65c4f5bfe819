// Directives from the controller to the shims (docs/architecture.md#directives): the protocol.
//   - Ids: durable (IdAllocator); a re-delivery keeps the id, and the shims and the trainer drop a
//     duplicate id (answering with their first ack), so a directive is never applied twice, also
//     after a controller restart (records are reloaded and PENDING ones re-delivered).
//   - Epoch fence: Epoch(job) = max(the epoch the job's shims registered, the epoch of every
//     topology or checkpoint-restart directive issued for it). Issuing S3 (topology_change) or S4
//     (checkpoint_restart) bumps it by one: the directive carries the new epoch and every later
//     directive too; shims reject directives below their fence. An ack of a directive whose epoch
//     is older than the job's fence is refused (AckOutcome.error names both epochs); the
//     directive, if still PENDING, becomes REJECTED as superseded (no rollback: the newer epoch
//     replaces its plan).
//   - Effective iteration: for plan directives (S2/S3/S4) never below EffectiveIteration(): the
//     highest iteration any rank reported plus a margin that covers the delivery latency at the
//     job's iteration time, so every rank receives it before it reaches that iteration.
//   - Acks from every target: APPLIED when every target rank applied it; REJECTED when one
//     rejected it (state_reason names the rank and its reason). Then, when some targets had
//     applied it and the record carries a rollback directive, the rollback is issued to them
//     (reverts_directive_id = the rejected id) and rollback_directive_id is recorded.
//   - Retries: a PENDING directive is re-delivered (same id) to the agents of the target ranks
//     that have not answered finally, after retry_initial, then with exponential backoff up to
//     retry_max; it becomes TIMED_OUT once ack_timeout (the budget) has passed since issue. While
//     its job is *held* (an agent of it is away, within the job-end grace: an agent restart) it
//     does not time out, and the whole budget is left when the hold ends (kept in memory: after a
//     controller restart the budget runs from the issue again).
//   - Every change (issue, delivery count, each ack, state) is staged in the caller's unit of work
//     and persisted before any message leaves: an ack as its own row (StoreTxn::PutDirectiveAck,
//     at its index in the record's acks), the record's row without its acks on issue, delivery
//     and state change (StoreTxn::PutDirective).
//   - Cost: an ack updates an in-memory index of its directive (rank -> its ack, counts of APPLIED
//     and REJECTED ranks), so deciding the state is O(1) amortized per ack, and so is storing it.
//     What stays O(N) in the directive's N acks: building the index (Issue, Load, first ack of a
//     loaded final directive), the rejection (once: finds the rejecting rank and the ranks to roll
//     back), the check that every rank of the job applied a directive without target_ranks (once
//     the count of applied ranks reaches the job's rank count), and a re-delivery or time-out
//     (Tick: the ranks without a final ack).
// Not thread-safe: controller loop only.
#ifndef FALCON_CONTROLLER_CORE_DIRECTIVE_ISSUER_H_
#define FALCON_CONTROLLER_CORE_DIRECTIVE_ISSUER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "controller/core/agent_hub.h"
#include "controller/core/id_allocator.h"
#include "controller/core/unit_of_work.h"
#include "controller/metrics/controller_metrics.h"
#include "controller/registry/job_registry.h"
#include "proto/falcon/v1/control.pb.h"

namespace falcon::controller::core {

struct DirectiveOptions {
  // A directive not applied by every target within this long becomes TIMED_OUT. Default: 60 s.
  absl::Duration ack_timeout = absl::Seconds(60);
  // First re-delivery of a PENDING directive this long after a send; doubled after every
  // re-delivery up to retry_max. Defaults 5 s and 20 s.
  absl::Duration retry_initial = absl::Seconds(5);
  absl::Duration retry_max = absl::Seconds(20);
  // Effective iteration margin: at least min_lead_iterations ahead of the most advanced rank, and
  // enough iterations to cover delivery_latency (controller -> agent -> shim -> trainer poll) at
  // the job's iteration time, plus one. Defaults 2 and 1 s.
  int64_t min_lead_iterations = 2;
  absl::Duration delivery_latency = absl::Seconds(1);

  absl::Status Validate() const;
};

// What the issuer needs to know of a job's progress: the highest iteration any rank reported (-1
// none) and the latest job iteration time (zero unknown).
struct JobProgress {
  int64_t max_rank_iteration = -1;
  absl::Duration iteration_time;
};

class DirectiveIssuer {
 public:
  // `metrics` (nullable, not owned) counts committed directives by strategy, and the rejected,
  // timed-out and refused ones it logs as falcon_controller_errors_total{where}.
  DirectiveIssuer(DirectiveOptions options, const common::Clock* clock, IdAllocator* ids,
                  AgentHub* hub, metrics::ControllerMetrics* metrics = nullptr);

  using ProgressFn = std::function<JobProgress(const std::string& job)>;
  // Where effective iterations and rollbacks read the job's progress (default: none known).
  void set_progress_fn(ProgressFn fn) { progress_ = std::move(fn); }

  // Replaces the records with stored ones (ControllerStore::LoadDirectives()). PENDING ones are
  // due for re-delivery at the next Tick.
  void Load(const std::vector<falcon::v1::DirectiveRecord>& records);

  // The job's epoch fence (see above).
  uint64_t Epoch(const registry::JobEntry& job) const;
  // The earliest effective iteration a plan directive may carry now (see above).
  int64_t EffectiveIteration(const std::string& job) const;

  // Assigns directive_id, sets job and the epoch (the fence; bumped first for S3/S4), raises the
  // effective iteration of a plan directive to EffectiveIteration() and its plan_version above
  // every plan issued to the job before (and the job's plan in force), stores the record as PENDING
  // in `uow` and, after the commit, sends the directive to the agents hosting its target ranks
  // (every rank of the job when target_ranks is empty). `rollback` (optional) is what to send to
  // the ranks that applied it should another target reject it. Returns the id.
  uint64_t Issue(falcon::v1::Directive directive, uint64_t event_id, const registry::JobEntry& job,
                 UnitOfWork* uow, const falcon::v1::Directive* rollback = nullptr);

  struct AckOutcome {
    const falcon::v1::DirectiveRecord* record = nullptr;  // nullptr: unknown or refused ack.
    bool state_changed = false;                           // PENDING became APPLIED or REJECTED.
    uint64_t rollback_id = 0;  // A rollback directive was issued (state_changed to REJECTED).
    std::string error;         // Why the ack was refused (unknown id, wrong job, stale epoch).
  };
  // Records `ack` (one ack per rank; a later ack replaces an earlier one) and recomputes the
  // state: APPLIED when every target rank applied it, REJECTED when any rejected it (then rolls
  // back, see above). An ack whose epoch differs from its directive's, or is older than the
  // job's fence, is refused: error says so; a PENDING directive of an older epoch becomes
  // REJECTED (superseded).
  AckOutcome OnAck(const falcon::v1::DirectiveAck& ack, const registry::JobEntry& job,
                   UnitOfWork* uow);

  // PENDING directives older than ack_timeout become TIMED_OUT (returned); the others that are
  // due are re-delivered (same id) to the agents of the targets without a final ack.
  // `jobs` resolves the job of a directive for re-delivery (nullptr: skip re-delivery); `held`
  // says whether a job is held (see above; unset: none is).
  std::vector<uint64_t> Tick(
      absl::Time now, UnitOfWork* uow,
      const std::function<const registry::JobEntry*(const std::string&)>& jobs = {},
      const std::function<bool(const std::string&)>& held = {});

  // Sends the job's PENDING directives that target ranks of `agent_id` again (it reconnected;
  // the shims drop duplicates by id).
  void Redeliver(const std::string& agent_id, const registry::JobEntry& job);

  const falcon::v1::DirectiveRecord* Find(uint64_t directive_id) const;
  // Newest first; job "" = all jobs; limit 0 = all.
  std::vector<falcon::v1::DirectiveRecord> List(const std::string& job, uint32_t limit) const;
  // Directives held (every state).
  size_t size() const { return records_.size(); }
  // A page of List: up to `max` records with ids below `before_id` (0 = from the newest).
  std::vector<const falcon::v1::DirectiveRecord*> ListBefore(const std::string& job,
                                                             uint64_t before_id, size_t max) const;

  // Retention. Ids of directives that are final (not PENDING) and were last sent at or before
  // `cutoff`, oldest first, at most `max`; `keep(record)` true spares one (e.g. its event is still
  // active), and so is the newest epoch-bumping (S3/S4) directive of each job, which keeps the
  // job's epoch fence across a restart.
  std::vector<uint64_t> Expired(
      absl::Time cutoff, size_t max,
      const std::function<bool(const falcon::v1::DirectiveRecord&)>& keep) const;
  // Ids of every directive of the jobs in `jobs`.
  std::vector<uint64_t> DirectivesOfJobs(const absl::flat_hash_set<std::string>& jobs) const;
  // Forgets directives (their deletes are staged by the caller) and the epoch fences of `jobs`.
  void Forget(const std::vector<uint64_t>& directive_ids,
              const absl::flat_hash_set<std::string>& jobs);
  // Target ranks of a directive (its target_ranks, or every rank of the job).
  static std::vector<uint32_t> Targets(const falcon::v1::Directive& d,
                                       const registry::JobEntry& job);

 private:
  struct Retry {
    absl::Time due;
    absl::Duration backoff;
    absl::Time deadline;  // TIMED_OUT from then on: issue + ack_timeout, later if held.
  };
  static bool IsPlan(const falcon::v1::Directive& d);
  static bool BumpsEpoch(const falcon::v1::Directive& d);
  void SendTo(const falcon::v1::Directive& d, const registry::JobEntry& job,
              const std::string& only_agent, const std::set<uint32_t>& only_ranks = {});
  // The acks of one directive, indexed: equal to what Index(record) builds from record.acks().
  struct AckIndex {
    absl::flat_hash_map<uint32_t, int> position;  // rank -> its (first) ack in record.acks.
    // Some rank has two acks (a refused ack kept for the record): position is not enough to
    // replace them all; OnAck falls back to scanning and rebuilds the index.
    bool duplicates = false;
    bool all_ranks = false;                 // No target_ranks: every rank of the job.
    absl::flat_hash_set<uint32_t> targets;  // target_ranks (distinct), unless all_ranks.
    int64_t applied = 0;                    // Acks APPLIED.
    int64_t applied_targets = 0;            // Acks APPLIED of ranks in targets.
    int64_t rejected = 0;                   // Acks REJECTED.
    void Count(uint32_t rank, falcon::v1::AckStatus status, int delta);
  };
  static AckIndex Index(const falcon::v1::DirectiveRecord& record);
  // The index of `record` (built if missing).
  AckIndex& IndexOf(const falcon::v1::DirectiveRecord& record);
  void UpdateState(falcon::v1::DirectiveRecord& record, const AckIndex& index,
                   const registry::JobEntry& job, UnitOfWork* uow, AckOutcome* out);
  // Counts a handled error logged at `where` (metric::where), when there are metrics.
  void CountError(absl::string_view where) const;

  const DirectiveOptions options_;
  const common::Clock* const clock_;
  IdAllocator* const ids_;
  AgentHub* const hub_;
  metrics::ControllerMetrics* const metrics_;
  ProgressFn progress_;
  std::map<uint64_t, falcon::v1::DirectiveRecord> records_;
  std::map<uint64_t, Retry> retries_;  // PENDING ones only.
  // Directive id -> its acks' index: built on Issue, on Load for PENDING ones, and on the first
  // ack of any other one; dropped with the record. A node map: Issue (a rollback) inserts while
  // UpdateState holds an index.
  std::map<uint64_t, AckIndex> acks_;
  std::map<std::string, uint64_t> issued_epoch_;  // job -> highest epoch of its S3/S4.
  // job -> highest plan_version of a plan directive issued (Issue raises a plan's to above it).
  std::map<std::string, int64_t> issued_plan_version_;
};

}  // namespace falcon::controller::core

#endif  // FALCON_CONTROLLER_CORE_DIRECTIVE_ISSUER_H_
