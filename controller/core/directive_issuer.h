// Directives from the controller to the shims (ARCHITECTURE.md §5): ids, the job's epoch, the
// effective iteration, persistence before sending, per-rank acks and the resulting state. This is
// the part the detection pipeline needs (Pause / Resume for validation); the mitigation issue
// adds retries with idempotent re-delivery and rollback on top of the same records.
// Not thread-safe: controller loop only.
#ifndef FALCON_CONTROLLER_CORE_DIRECTIVE_ISSUER_H_
#define FALCON_CONTROLLER_CORE_DIRECTIVE_ISSUER_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "analysis/clock.h"
#include "controller/core/agent_hub.h"
#include "controller/core/id_allocator.h"
#include "controller/core/unit_of_work.h"
#include "controller/metrics/controller_metrics.h"
#include "controller/registry/job_registry.h"
#include "proto/falcon/v1/control.pb.h"

namespace falcon::controller {

struct DirectiveOptions {
  // A directive not applied by every target within this long becomes TIMED_OUT. Default: 60 s.
  absl::Duration ack_timeout = absl::Seconds(60);
};

class DirectiveIssuer {
 public:
  // `metrics` (nullable, not owned) counts committed directives by strategy.
  DirectiveIssuer(DirectiveOptions options, const Clock* clock, IdAllocator* ids, AgentHub* hub,
                  ControllerMetrics* metrics = nullptr);

  // Replaces the records with stored ones (ControllerStore::LoadDirectives()).
  void Load(const std::vector<falcon::v1::DirectiveRecord>& records);

  // Assigns directive_id, sets job and the job's epoch, stores the record as PENDING in `uow` and,
  // after the commit, sends the directive to the agents hosting its target ranks (every rank of
  // the job when target_ranks is empty). Returns the id.
  uint64_t Issue(falcon::v1::Directive directive, uint64_t event_id, const JobEntry& job,
                 UnitOfWork* uow);

  struct AckOutcome {
    const falcon::v1::DirectiveRecord* record = nullptr;  // nullptr: unknown directive.
    bool state_changed = false;                           // PENDING became APPLIED or REJECTED.
  };
  // Records `ack` (one ack per rank; a later ack replaces an earlier one) and recomputes the
  // state: APPLIED when every target rank applied it, REJECTED when any rejected it.
  AckOutcome OnAck(const falcon::v1::DirectiveAck& ack, const JobEntry& job, UnitOfWork* uow);

  // PENDING directives older than ack_timeout become TIMED_OUT. Returns their ids.
  std::vector<uint64_t> Tick(absl::Time now, UnitOfWork* uow);

  // Sends the job's PENDING directives that target ranks of `agent_id` again (it reconnected;
  // the shims drop duplicates by id).
  void Redeliver(const std::string& agent_id, const JobEntry& job);

  const falcon::v1::DirectiveRecord* Find(uint64_t directive_id) const;
  // Newest first; job "" = all jobs; limit 0 = all.
  std::vector<falcon::v1::DirectiveRecord> List(const std::string& job, uint32_t limit) const;
  // Target ranks of a directive (its target_ranks, or every rank of the job).
  static std::vector<uint32_t> Targets(const falcon::v1::Directive& d, const JobEntry& job);

 private:
  void SendTo(const falcon::v1::Directive& d, const JobEntry& job, const std::string& only_agent);

  const DirectiveOptions options_;
  const Clock* const clock_;
  IdAllocator* const ids_;
  AgentHub* const hub_;
  ControllerMetrics* const metrics_;
  std::map<uint64_t, falcon::v1::DirectiveRecord> records_;
};

}  // namespace falcon::controller

#endif  // FALCON_CONTROLLER_CORE_DIRECTIVE_ISSUER_H_
