// The job registry: jobs as the agents register them (ranks, nodes, communicators, layout), merged
// across the agents of a job, with communicator roles inferred when not hinted
// (role_inference.h). The registry owns JobRecord (persisted on every change); the detection
// pipeline owns the per-iteration fields of the Job it serves. Not thread-safe: controller loop.
#ifndef FALCON_CONTROLLER_REGISTRY_JOB_REGISTRY_H_
#define FALCON_CONTROLLER_REGISTRY_JOB_REGISTRY_H_

#include <cstdint>
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
};

// One job: its record plus indices. Cheap to copy for a tentative merge.
class JobEntry {
 public:
  explicit JobEntry(falcon::controller::v1::JobRecord record);

  const std::string& name() const { return record_.job().job(); }
  uint32_t world_size() const { return record_.job().world_size(); }
  uint64_t epoch() const { return record_.job().epoch(); }
  const falcon::controller::v1::JobRecord& record() const { return record_; }
  const falcon::v1::Job& job() const { return record_.job(); }

  const CommInfo* FindComm(uint64_t comm_id) const;
  const falcon::v1::RankInfo* FindRank(uint32_t rank) const;
  // Agent that registered `rank`; nullptr when none.
  const std::string* AgentOfRank(uint32_t rank) const;
  std::vector<std::string> AgentIds() const;
  // Registered ranks, ascending.
  const std::vector<uint32_t>& ranks() const { return ranks_; }
  const absl::flat_hash_map<uint64_t, CommInfo>& comms() const { return comms_; }
  // Comms whose members include `rank`.
  std::vector<const CommInfo*> CommsOfRank(uint32_t rank) const;

  // Records observed op kinds on a comm; re-infers roles. True when a role changed.
  bool ObserveTraffic(uint64_t comm_id, uint64_t p2p_ops, uint64_t collective_ops);

  void set_state(falcon::v1::JobState state) { record_.mutable_job()->set_state(state); }
  void set_ended_time_ns(int64_t t) { record_.set_ended_time_ns(t); }
  // The micro-batch / topology plan in force (set by mitigation).
  void set_plan(int64_t plan_version, const std::vector<uint32_t>& micro_batches) {
    record_.mutable_job()->set_plan_version(plan_version);
    record_.mutable_job()->clear_micro_batches();
    for (uint32_t m : micro_batches) record_.mutable_job()->add_micro_batches(m);
  }

  // Merges `reg` as agent_id's part (see JobRegistry::Merge). Errors: FieldError under `path`.
  util::MaybeFieldError MergeFrom(const std::string& agent_id, const std::string& node,
                                  const falcon::v1::JobRegistration& reg, const std::string& path);
  // Removes agent_id's part. True when it had one.
  bool RemoveAgent(const std::string& agent_id);

 private:
  void Rebuild();
  void Infer();

  falcon::controller::v1::JobRecord record_;
  std::vector<uint32_t> ranks_;
  absl::flat_hash_map<uint32_t, int> rank_index_;  // rank -> index in job().ranks().
  absl::flat_hash_map<uint32_t, int> rank_agent_;  // rank -> index in record_.agents().
  absl::flat_hash_map<uint64_t, CommInfo> comms_;
};

// `reg` completed with `agent_id`'s current part of `job`: the ranks and communicators that part
// has and `reg` lacks are added, and layout sizes `reg` leaves 0 are taken from it. Only when the
// part has the same epoch and world_size (otherwise `reg` is returned as it is). For an agent
// rejoining a job (registry/job_presence.h): its shims reattach one at a time, and the job keeps
// its ranks meanwhile.
falcon::v1::JobRegistration WithEarlierPart(const JobEntry& job, const std::string& agent_id,
                                            falcon::v1::JobRegistration reg);

class JobRegistry {
 public:
  JobRegistry() = default;

  // Replaces the registry with stored records (ControllerStore::LoadJobs()).
  void Load(const std::vector<falcon::controller::v1::JobRecord>& records);

  // The job as it would be after merging `reg` as agent_id's part: the agent's earlier part is
  // replaced; ranks it lists are taken from other agents (last writer wins); a newer epoch drops
  // parts of older epochs. Sets `*out`; nothing changes until Install. `reg` must have passed
  // ValidateJobRegistration.
  // Errors (FieldError under `path`): an epoch older than the job's; a world_size different from
  // the one registered at the same epoch; a communicator whose members differ from another
  // agent's registration of the same comm_id.
  util::MaybeFieldError Merge(const std::string& agent_id, const std::string& node,
                              const falcon::v1::JobRegistration& reg, const std::string& path,
                              std::optional<JobEntry>* out) const;
  // Installs `entry` (from Merge, or a modified copy of Find()) and stages its record in `txn`.
  JobEntry* Install(JobEntry entry, store::StoreTxn* txn);
  // Stages the record of an entry changed in place (state, traffic).
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
  void IndexAgents(const JobEntry& entry, bool add);

  absl::btree_map<std::string, std::unique_ptr<JobEntry>> jobs_;
  // agent id -> names of the jobs it has a part in.
  absl::flat_hash_map<std::string, absl::flat_hash_set<std::string>> agent_jobs_;
};

}  // namespace falcon::controller::registry

#endif  // FALCON_CONTROLLER_REGISTRY_JOB_REGISTRY_H_
