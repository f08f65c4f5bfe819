// Directive intake for one rank (docs/architecture.md#directives,
// falcon.v1.Directive in common.proto).
//
// The reader thread hands each directive from the agent to Receive(), which checks it and answers
// with an ack to send at once: RECEIVED (queued), REJECTED with a reason (malformed, wrong job,
// stale epoch, already past its iteration), or the previous ack again for a re-delivered id.
// The trainer thread calls TakeDue() at its safe point: pending directives whose epoch has become
// stale or whose effective iteration has passed are rejected; those whose effective iteration has
// arrived are returned in (effective_iteration, directive_id) order. After applying one, the
// trainer thread calls Complete(), which produces the final APPLIED or REJECTED ack and, when an
// applied directive carries a newer epoch, advances the epoch fence. Every directive that targets
// this rank therefore gets exactly one final ack. Thread-safe.
//
// Iterations: -1 means the trainer's iteration is unknown (an unmodified trainer under the NCCL
// interposer); then every pending directive is due at the next safe point and none is late.
//
// Agreed mode (Options::agreed): the trainer agrees with the other ranks, at each iteration
// boundary, on which job-wide directives (AgreedKind) to apply there (those every rank holds),
// and passes that set to TakeDue. A job-wide directive is then due only when agreed, and is never
// rejected as late: every rank applies it at the same boundary, the first all ranks held it at.
// The other kinds (Resume, Profiling, directives with target ranks) stay due as above.
#ifndef FALCON_TRAINER_SHIM_DIRECTIVE_INTAKE_H_
#define FALCON_TRAINER_SHIM_DIRECTIVE_INTAKE_H_

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "proto/falcon/v1/common.pb.h"

namespace falcon::trainer_shim {

class DirectiveIntake {
 public:
  struct Options {
    std::string job;
    uint32_t rank = 0;
    uint32_t world_size = 1;
    uint64_t epoch = 0;                 // Initial epoch fence.
    uint32_t dp_size = 0;               // 0: unknown (micro-batch plan length not checked).
    uint32_t global_micro_batches = 0;  // 0: unknown (plan sum not checked).
    // Layer split checks (common::ValidateLayerSplit): the pipeline's stages (0: unknown; every
    // replica then needs as many stages as the first) and the model's blocks (0: unknown; every
    // replica's stage counts then sum to the first's). With DP or PP unknown, the split's
    // replicas x stages must fit in world_size.
    uint32_t pp_size = 0;
    uint32_t pipeline_blocks = 0;
    bool agreed = false;  // Agreed mode (above).
    // Agreed mode: a job-wide directive not agreed this many iterations after its effective one
    // is rejected (some rank never held it: the ranks that do must not keep it forever).
    int64_t agree_grace_iterations = 8;
  };
  // A pending job-wide directive (agreed mode): what a rank tells the others.
  struct PendingId {
    uint64_t directive_id = 0;
    int64_t effective_iteration = 0;
  };
  struct Due {
    std::vector<falcon::v1::Directive> due;      // To apply now, in order.
    std::vector<falcon::v1::DirectiveAck> acks;  // REJECTED acks for stale/late pending ones.
  };

  explicit DirectiveIntake(Options options);

  // Structural checks that do not depend on state (ids, kind present, ranges, plan shapes; a
  // layer split's shape against dp_size, pp_size, pipeline_blocks and global_micro_batches where
  // known). kInvalidArgument naming the field, e.g. "directive.layer_split.replicas[1]...".
  absl::Status CheckWellFormed(const falcon::v1::Directive& d) const;

  // From the agent (reader thread). The ack to send now, or nullopt when the directive does not
  // target this rank (target_ranks non-empty without it).
  std::optional<falcon::v1::DirectiveAck> Receive(const falcon::v1::Directive& d);

  // Trainer safe point at `iteration` (>= 0, or -1 unknown). Agreed mode: `agreed` holds the ids
  // of the job-wide directives to apply now (null: none); the others wait.
  Due TakeDue(int64_t iteration, const absl::flat_hash_set<uint64_t>* agreed = nullptr);

  // Whether `d` goes through the ranks' agreement in agreed mode: no target ranks, and neither a
  // Resume (it reaches a paused rank) nor a Profiling change (each rank's own).
  static bool AgreedKind(const falcon::v1::Directive& d);
  // Agreed mode: the pending job-wide directives, by id (ascending).
  std::vector<PendingId> PendingAgreed() const;
  // Agreed mode: a Resume `resume_id` came while this rank was not paused: the pending Pauses
  // before it are over before the ranks agreed on them, and are rejected (their acks returned).
  std::vector<falcon::v1::DirectiveAck> SupersedePauses(uint64_t resume_id);

  // Trainer finished `d` (returned by TakeDue) at `iteration`: OK -> APPLIED, else REJECTED with
  // the status message as the reason.
  falcon::v1::DirectiveAck Complete(const falcon::v1::Directive& d, int64_t iteration,
                                    const absl::Status& result);

  // --- Trainer-applied mode (Shim with ShimOptions::trainer_applies_directives). ---
  // The trainer queues, agrees on (across ranks), applies and acks directives itself; the intake
  // only screens them and keeps every rank's acks consistent.
  struct Screened {
    bool forward = false;                           // Hand to the trainer.
    std::optional<falcon::v1::DirectiveAck> reply;  // Send to the agent now.
  };
  // From the agent (reader thread). A new, well-formed directive of this job and epoch is
  // forwarded (targets or not: the trainer applies directives globally); one that is not is
  // rejected (targets only). A re-delivered id is answered with this rank's last ack (final or
  // RECEIVED) and not forwarded again, so the trainer never sees it twice from this rank. Nothing
  // is rejected as late: the trainer applies a late directive at its next boundary on every rank.
  Screened ScreenForTrainer(const falcon::v1::Directive& d);
  // The trainer acked `d`. The ack to send, or nullopt when this (id, status) was already sent or
  // the id already has a final outcome (an outcome is sent exactly once). An APPLIED directive
  // with a newer epoch advances the fence.
  std::optional<falcon::v1::DirectiveAck> TrainerAck(const falcon::v1::Directive& d,
                                                     falcon::v1::AckStatus status,
                                                     std::string reason, int64_t applied_iteration);

  // Removes and returns the first pending Resume, whatever its effective iteration (a paused rank
  // cannot reach it). nullopt when none.
  std::optional<falcon::v1::Directive> TakeResume();

  // Cheap, lock-free: whether anything is pending.
  bool HasPending() const { return pending_count_.load(std::memory_order_acquire) > 0; }
  uint64_t epoch() const;
  // Raises the epoch fence (never lowers it). Pending directives below it are rejected as stale
  // at the next TakeDue.
  void AdvanceEpoch(uint64_t epoch);

 private:
  struct Seen {
    falcon::v1::DirectiveAck last_ack;
    bool final = false;  // APPLIED or REJECTED was sent.
  };

  falcon::v1::DirectiveAck MakeAck(const falcon::v1::Directive& d, falcon::v1::AckStatus status,
                                   std::string reason, int64_t applied_iteration) const;
  falcon::v1::DirectiveAck RejectLocked(const falcon::v1::Directive& d, std::string reason)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  static bool IsLateExempt(const falcon::v1::Directive& d);

  const Options options_;
  mutable absl::Mutex mu_;
  uint64_t epoch_ ABSL_GUARDED_BY(mu_);
  int64_t iteration_ ABSL_GUARDED_BY(mu_) = -1;  // Last iteration seen at a safe point.
  std::vector<falcon::v1::Directive> pending_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, Seen> seen_ ABSL_GUARDED_BY(mu_);
  std::atomic<int64_t> pending_count_{0};
};

}  // namespace falcon::trainer_shim

#endif  // FALCON_TRAINER_SHIM_DIRECTIVE_INTAKE_H_
