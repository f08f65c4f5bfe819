// The job registry: jobs as the agents register them (ranks, nodes, communicators, layout), merged
// across the agents of a job, with communicator roles inferred when not hinted
// (role_inference.h). The registry owns the stored form of a job (persisted on every change): its
// JobRecord (jobs table; small, no ranks) and each agent's part (AgentJob, job_parts table), so a
// registration writes what it changed, not the whole job. The detection pipeline owns the
// per-iteration fields of the Job it serves. Not thread-safe: controller loop.
#ifndef FALCON_CONTROLLER_REGISTRY_JOB_REGISTRY_H_
#define FALCON_CONTROLLER_REGISTRY_JOB_REGISTRY_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/btree_map.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "controller/registry/role_inference.h"
#include "controller/store/controller_store.h"
#include "controller/util/field_error.h"
#include "proto/falcon/v1/control.pb.h"
#include "proto/falcon/v1/telemetry.pb.h"

namespace falcon::controller::registry {

struct CommInfo {
  falcon::v1::Communicator comm;  // kind = effective role (hint, else inferred).
  falcon::v1::CommKind hint = falcon::v1::COMM_KIND_UNKNOWN;
  std::vector<uint32_t> sorted_members;   // For membership tests.
  std::vector<std::string> member_nodes;  // Node of each member in comm order ("" unknown).
  CommTraffic traffic;

  bool HasMember(uint32_t rank) const;

  // Kept by JobEntry: the agents whose parts list the comm, with the kind and name each gave
  // (the first known kind in agent order is the hint, the first non-empty name the name), and
  // what role inference needs of the comm.
  std::map<std::string, std::pair<falcon::v1::CommKind, std::string>> registrants;
  bool one_node = false;     // OnOneNode(member_nodes).
  bool spans_nodes = false;  // SpansNodes(member_nodes).
  int counted_kind = -1;     // Kind and size JobEntry counts the comm under (-1: not counted).
  uint32_t counted_size = 0;
};

// Parts of a job changed by one merge, each with its value before (nullopt: none), in the order
// changed, and the traffic of the comms the change removed: what undoes the merge.
struct PartChanges {
  std::vector<std::pair<std::string, std::optional<falcon::controller::v1::AgentJob>>> parts;
  std::vector<std::pair<uint64_t, CommTraffic>> removed_traffic;
};

// One job: the parts its agents registered and indices over them. Every change costs what the
// changed parts hold (their ranks and communicators), not what the job holds: the indices and the
// inferred roles are updated for those parts only (roles of every comm are inferred again only
// when the job's layout hints, world size or node spread change). Copyable (a snapshot).
class JobEntry {
 public:
  // An empty job (no parts) named `name`.
  explicit JobEntry(const std::string& name);
  // From a record as stores of earlier versions hold it: the parts inside (record.agents).
  explicit JobEntry(falcon::controller::v1::JobRecord record);

  const std::string& name() const { return record_.job().job(); }
  uint32_t world_size() const { return record_.job().world_size(); }
  uint64_t epoch() const { return record_.job().epoch(); }
  // The job's own record, what the jobs table holds: job() and ended_time_ns, no parts.
  const falcon::controller::v1::JobRecord& record() const { return record_; }
  // The job without its ranks, communicators and nodes (View() has them): name, world size,
  // epoch, layout sizes (hinted, else inferred), state, plan.
  const falcon::v1::Job& job() const { return record_.job(); }
  // The whole job as the Control API serves it: job() with every rank (ascending), communicator
  // (by id, with its effective kind) and node (sorted). Costs what the job holds.
  falcon::v1::Job View() const;
  // Each agent's part (the registration it sent last), by agent id.
  const std::map<std::string, falcon::controller::v1::AgentJob>& parts() const { return parts_; }

  const CommInfo* FindComm(uint64_t comm_id) const;
  const falcon::v1::RankInfo* FindRank(uint32_t rank) const;
  // Agent that registered `rank`; nullptr when none.
  const std::string* AgentOfRank(uint32_t rank) const;
  // Agents with a part, sorted.
  std::vector<std::string> AgentIds() const;
  bool HasPart(const std::string& agent_id) const { return parts_.count(agent_id) > 0; }
  // Registered ranks, ascending.
  const std::vector<uint32_t>& ranks() const { return ranks_; }
  const absl::flat_hash_map<uint64_t, CommInfo>& comms() const { return comms_; }
  // Whether some comm has no role hint (its role is inferred, and traffic may change it).
  bool HasUnhintedComms() const { return unhinted_comms_ > 0; }
  // Comms whose members include `rank`, by id.
  std::vector<const CommInfo*> CommsOfRank(uint32_t rank) const;
  // Registered ranks whose RankInfo.node is `node`, ascending; empty for "" or an unknown node.
  // Costs what the job holds.
  std::vector<uint32_t> RanksOnNode(const std::string& node) const;

  // Records observed op kinds on a comm; infers its role again. True when a role changed.
  bool ObserveTraffic(uint64_t comm_id, uint64_t p2p_ops, uint64_t collective_ops);

  void set_state(falcon::v1::JobState state) { record_.mutable_job()->set_state(state); }
  void set_ended_time_ns(int64_t t) { record_.set_ended_time_ns(t); }
  // The micro-batch / topology plan in force (set by mitigation).
  void set_plan(int64_t plan_version, const std::vector<uint32_t>& micro_batches) {
    record_.mutable_job()->set_plan_version(plan_version);
    record_.mutable_job()->clear_micro_batches();
    for (uint32_t m : micro_batches) record_.mutable_job()->add_micro_batches(m);
  }
  // The layer split in force (S2L; per DP index, empty: every pipeline even), set with the plan.
  void set_layer_split(
      const google::protobuf::RepeatedPtrField<falcon::v1::ReplicaSplit>& layer_split) {
    *record_.mutable_job()->mutable_layer_split() = layer_split;
  }

  // Whether `reg` may be merged as agent_id's part (see JobRegistry::Register); nothing changes.
  util::MaybeFieldError CheckPart(const std::string& agent_id,
                                  const falcon::v1::JobRegistration& reg,
                                  const std::string& path) const;
  // Merges `reg` as agent_id's part (JobRegistry::Register) after CheckPart passed. `changes`
  // receives every part changed (the agent's own, those ranks were taken from, those dropped by
  // a newer epoch) with its value before.
  void MergePart(const std::string& agent_id, const std::string& node,
                 const falcon::v1::JobRegistration& reg, PartChanges* changes);
  // Undoes the merge that filled `changes` (nothing else changed the entry since).
  void Revert(PartChanges changes);
  // Removes agent_id's part. True when it had one.
  bool RemoveAgent(const std::string& agent_id);

 private:
  struct RankSlot {
    std::string agent;
    falcon::v1::RankInfo info;
  };
  // Sets agent_id's part to `part` (nullopt: removes it) as it is: its ranks must not be another
  // part's. The traffic of comms it removes goes to `removed` when set.
  void SetPart(const std::string& agent_id, std::optional<falcon::controller::v1::AgentJob> part,
               std::vector<std::pair<uint64_t, CommTraffic>>* removed = nullptr);
  // Takes the ranks `reg` lists from the other parts that have them (last writer wins).
  void TakeRanks(const std::string& agent_id, const falcon::v1::JobRegistration& reg,
                 PartChanges* changes);
  void TakeRank(const std::string& agent_id, const falcon::v1::RankInfo& rank);
  void ReleaseRank(const std::string& agent_id, uint32_t rank);
  void JoinComm(const std::string& agent_id, const falcon::v1::Communicator& comm);
  void LeaveComm(const std::string& agent_id, uint64_t comm_id,
                 std::vector<std::pair<uint64_t, CommTraffic>>* removed);
  void SetMembers(uint64_t comm_id, CommInfo* info, const falcon::v1::Communicator& comm);
  void SetMemberNode(uint32_t rank, const std::string& node);
  void Uncount(CommInfo* c);
  // Header fields from the parts, then the roles of the dirty comms (of every comm when the
  // context changed) and the layout sizes.
  void Refresh();

  falcon::controller::v1::JobRecord record_;  // job() (no ranks, comms, nodes) + ended time.
  std::map<std::string, falcon::controller::v1::AgentJob> parts_;
  absl::flat_hash_map<uint32_t, RankSlot> rank_slots_;
  std::vector<uint32_t> ranks_;  // Sorted.
  absl::flat_hash_map<uint64_t, CommInfo> comms_;
  absl::flat_hash_map<uint32_t, std::vector<uint64_t>> rank_comms_;  // rank -> comms it is in.
  std::map<std::string, int> node_ranks_;                            // node -> its ranks.
  // Values over the parts, as counts (their maxima are the job's).
  std::map<uint64_t, int> epochs_;
  std::map<uint32_t, int> dp_hints_, pp_hints_, tp_hints_;
  std::map<uint32_t, int> pipeline_blocks_;    // The model's pipeline shape (0: unknown).
  std::map<uint64_t, int> block_state_bytes_;  // Parts of an epoch agree on it (CheckPart).
  // Comms whose roles are to be inferred again; sizes of the comms of each inferred kind.
  absl::flat_hash_set<uint64_t> dirty_;
  std::map<int, std::map<uint32_t, int>> kind_sizes_;
  int spanning_comms_ = 0;
  int unhinted_comms_ = 0;  // Comms without a role hint.
  RoleContext context_;     // What every role was last inferred with.
};

// `reg` completed with `agent_id`'s current part of `job`: the ranks and communicators that part
// has and `reg` lacks are added, and layout sizes `reg` leaves 0 are taken from it. Only when the
// part has the same epoch and world_size (otherwise `reg` is returned as it is). For an agent
// rejoining a job (registry/job_presence.h): its shims reattach one at a time, and the job keeps
// its ranks meanwhile.
falcon::v1::JobRegistration WithEarlierPart(const JobEntry& job, const std::string& agent_id,
                                            falcon::v1::JobRegistration reg);

// What restores a job as it was before a Register (JobRegistry::Undo).
struct RegistrationUndo {
  std::string job;
  bool created = false;                      // The job was new.
  falcon::controller::v1::JobRecord record;  // The job's record before.
  PartChanges changes;
};

class JobRegistry {
 public:
  JobRegistry() = default;

  // Replaces the registry with stored records (ControllerStore::LoadJobs()) and parts
  // (ControllerStore::LoadJobParts(), by job). A record with its parts inside (stores of earlier
  // versions) is stored again in today's form in `upgrade` when set: the job's record without
  // them and each part under its own key.
  void Load(const std::vector<falcon::controller::v1::JobRecord>& records,
            const std::vector<std::pair<std::string, falcon::controller::v1::AgentJob>>& parts = {},
            store::StoreTxn* upgrade = nullptr);

  // Whether `reg` may be merged as agent_id's part of its job; nothing changes. `reg` must have
  // passed ValidateJobRegistration.
  // Errors (FieldError under `path`): an epoch older than the job's; a world_size different from
  // the one registered at the same epoch; a pipeline_blocks or block_state_bytes different from
  // another agent's at the same epoch (0 is unknown: never different); a communicator whose
  // members differ from another agent's registration of the same comm_id.
  util::MaybeFieldError Check(const std::string& agent_id, const falcon::v1::JobRegistration& reg,
                              const std::string& path) const;
  // Merges `reg` as agent_id's part of its job (created when new): the agent's earlier part is
  // replaced; ranks it lists are taken from other agents (last writer wins); a newer epoch drops
  // parts of older epochs. Stages the job's record and every changed part in `txn`. Costs what
  // the changed parts hold, not the job. `undo`, when set, receives what Undo needs. Errors: those
  // of Check, and then nothing changes.
  util::MaybeFieldError Register(const std::string& agent_id, const std::string& node,
                                 const falcon::v1::JobRegistration& reg, const std::string& path,
                                 store::StoreTxn* txn, JobEntry** out = nullptr,
                                 RegistrationUndo* undo = nullptr);
  // Restores the job as it was before the Register that filled `undo` (nothing else may have
  // changed the job since). The caller drops the writes that Register staged.
  void Undo(RegistrationUndo undo);
  // Removes agent_id's part of `job` and stages the writes. The job, or nullptr when unknown.
  JobEntry* RemoveAgent(const std::string& job, const std::string& agent_id, store::StoreTxn* txn);
  // Stages the record of an entry changed in place (state, plan, traffic): small, no parts.
  void Persist(const JobEntry& entry, store::StoreTxn* txn) const;
  // Forgets `job` (retention; the caller stages the store's delete). False when unknown.
  bool Remove(const std::string& job);

  JobEntry* Find(const std::string& job);
  const JobEntry* Find(const std::string& job) const;
  std::vector<std::string> JobNames() const;  // Sorted.
  // Up to `max` jobs whose names sort after `after` ("" = from the first), in name order: the
  // cursor of paged listings.
  std::vector<const JobEntry*> JobsAfter(const std::string& after, size_t max) const;
  // Jobs in which `agent_id` has a part (ended ones included), sorted.
  std::vector<std::string> JobsOfAgent(const std::string& agent_id) const;
  // How many jobs `agent_id` has a part in: what --max_jobs_per_agent limits.
  size_t JobCountOfAgent(const std::string& agent_id) const;
  size_t size() const { return jobs_.size(); }

 private:
  void Index(const std::string& job, const std::string& agent_id, bool add);
  void StagePart(const JobEntry& entry, const std::string& agent_id, store::StoreTxn* txn) const;

  absl::btree_map<std::string, std::unique_ptr<JobEntry>> jobs_;
  // agent id -> names of the jobs it has a part in.
  absl::flat_hash_map<std::string, absl::flat_hash_set<std::string>> agent_jobs_;
};

}  // namespace falcon::controller::registry

#endif  // FALCON_CONTROLLER_REGISTRY_JOB_REGISTRY_H_
