#include "controller/registry/job_registry.h"

#include <algorithm>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace falcon::controller::registry {
namespace {

using falcon::controller::v1::AgentJob;
using falcon::controller::v1::JobRecord;

bool Known(falcon::v1::CommKind k) {
  return k != falcon::v1::COMM_KIND_UNKNOWN && k != falcon::v1::COMM_KIND_UNSPECIFIED;
}

template <typename K>
void Bump(std::map<K, int>* counts, const K& key, int by) {
  int& n = (*counts)[key];
  n += by;
  if (n <= 0) counts->erase(key);
}

template <typename K>
K Largest(const std::map<K, int>& counts) {
  return counts.empty() ? K{} : counts.rbegin()->first;
}

// A field every part of an epoch reports alike (the model's pipeline shape; 0 unknown): `mine`,
// agent_id's new value, against the values of the parts (`counts`, as JobEntry keeps them; `own`:
// agent_id's current part's, which `mine` replaces).
template <typename K, typename ValueOf>
util::MaybeFieldError SameModelField(const std::map<std::string, AgentJob>& parts, uint64_t epoch,
                                     const std::string& path, absl::string_view field,
                                     const std::string& agent_id, K mine, K own,
                                     const std::map<K, int>& counts, ValueOf value_of) {
  if (mine == 0) return std::nullopt;
  for (const auto& [value, n] : counts) {
    if (value == 0 || value == mine || (value == own && n == 1)) continue;
    std::string by = "another agent";
    for (const auto& [id, part] : parts) {
      if (id != agent_id && value_of(part.registration()) == value) {
        by = absl::StrCat("agent '", id, "'");
        break;
      }
    }
    return util::MakeFieldError(
        absl::StrCat(path, ".", field),
        absl::StrCat(mine, " conflicts with ", field, " ", value, " registered by ", by,
                     " at epoch ", epoch, ": every rank of a job must report the same model"));
  }
  return std::nullopt;
}

// The hint: the first known kind in agent order; the name: the first one given.
void FromRegistrants(CommInfo* info) {
  info->hint = info->registrants.begin()->second.first;
  for (const auto& [id, given] : info->registrants) {
    if (Known(given.first)) {
      info->hint = given.first;
      break;
    }
  }
  info->comm.clear_name();
  for (const auto& [id, given] : info->registrants) {
    if (!given.second.empty()) {
      info->comm.set_name(given.second);
      break;
    }
  }
}

bool SameContext(const RoleContext& a, const RoleContext& b) {
  return a.world_size == b.world_size && a.hinted.dp == b.hinted.dp && a.hinted.pp == b.hinted.pp &&
         a.hinted.tp == b.hinted.tp && a.any_spans_nodes == b.any_spans_nodes;
}

}  // namespace

bool CommInfo::HasMember(uint32_t rank) const {
  return std::binary_search(sorted_members.begin(), sorted_members.end(), rank);
}

JobEntry::JobEntry(const std::string& name) {
  record_.mutable_job()->set_job(name);
  record_.mutable_job()->set_state(falcon::v1::JOB_STATE_TRACKING);
}

JobEntry::JobEntry(JobRecord record) {
  google::protobuf::RepeatedPtrField<AgentJob> agents;
  agents.Swap(record.mutable_agents());
  record_ = std::move(record);
  falcon::v1::Job* job = record_.mutable_job();
  job->clear_ranks();
  job->clear_communicators();
  job->clear_nodes();
  if (job->state() == falcon::v1::JOB_STATE_UNSPECIFIED) {
    job->set_state(falcon::v1::JOB_STATE_TRACKING);
  }
  for (AgentJob& a : agents) {
    const std::string id = a.agent_id();
    PartChanges ignored;
    TakeRanks(id, a.registration(), &ignored);
    SetPart(id, std::move(a));
  }
  Refresh();
}

const CommInfo* JobEntry::FindComm(uint64_t comm_id) const {
  auto it = comms_.find(comm_id);
  return it == comms_.end() ? nullptr : &it->second;
}

const falcon::v1::RankInfo* JobEntry::FindRank(uint32_t rank) const {
  auto it = rank_slots_.find(rank);
  return it == rank_slots_.end() ? nullptr : &it->second.info;
}

const std::string* JobEntry::AgentOfRank(uint32_t rank) const {
  auto it = rank_slots_.find(rank);
  return it == rank_slots_.end() ? nullptr : &it->second.agent;
}

std::vector<std::string> JobEntry::AgentIds() const {
  std::vector<std::string> ids;
  ids.reserve(parts_.size());
  for (const auto& [id, part] : parts_) ids.push_back(id);
  return ids;
}

std::vector<const CommInfo*> JobEntry::CommsOfRank(uint32_t rank) const {
  std::vector<const CommInfo*> out;
  auto it = rank_comms_.find(rank);
  if (it == rank_comms_.end()) return out;
  for (uint64_t id : it->second) out.push_back(&comms_.at(id));
  std::sort(out.begin(), out.end(), [](const CommInfo* a, const CommInfo* b) {
    return a->comm.comm_id() < b->comm.comm_id();
  });
  return out;
}

std::vector<uint32_t> JobEntry::RanksOnNode(const std::string& node) const {
  std::vector<uint32_t> out;
  if (node.empty() || node_ranks_.count(node) == 0) return out;
  for (uint32_t r : ranks_) {
    if (rank_slots_.at(r).info.node() == node) out.push_back(r);
  }
  return out;
}

falcon::v1::Job JobEntry::View() const {
  falcon::v1::Job view = record_.job();
  for (uint32_t r : ranks_) *view.add_ranks() = rank_slots_.at(r).info;
  std::vector<uint64_t> ids;
  ids.reserve(comms_.size());
  for (const auto& [id, c] : comms_) ids.push_back(id);
  std::sort(ids.begin(), ids.end());
  for (uint64_t id : ids) *view.add_communicators() = comms_.at(id).comm;
  for (const auto& [node, count] : node_ranks_) view.add_nodes(node);
  return view;
}

bool JobEntry::ObserveTraffic(uint64_t comm_id, uint64_t p2p_ops, uint64_t collective_ops) {
  auto it = comms_.find(comm_id);
  if (it == comms_.end()) return false;
  it->second.traffic.p2p_ops += p2p_ops;
  it->second.traffic.collective_ops += collective_ops;
  const falcon::v1::CommKind before = it->second.comm.kind();
  dirty_.insert(comm_id);
  Refresh();
  return it->second.comm.kind() != before;
}

util::MaybeFieldError JobEntry::CheckPart(const std::string& agent_id,
                                          const falcon::v1::JobRegistration& reg,
                                          const std::string& path) const {
  if (parts_.empty()) return std::nullopt;
  if (reg.epoch() < epoch()) {
    return util::MakeFieldError(
        path + ".epoch", absl::StrCat(reg.epoch(), " is older than the job's epoch ", epoch()));
  }
  // A newer epoch starts the job's layout over: every other part is dropped.
  if (reg.epoch() > epoch()) return std::nullopt;
  // Every part of an epoch has the same world_size (each was checked against the others).
  for (const auto& [id, part] : parts_) {
    if (id == agent_id) continue;
    if (part.registration().world_size() != reg.world_size()) {
      return util::MakeFieldError(
          path + ".world_size",
          absl::StrCat(reg.world_size(), " conflicts with world_size ",
                       part.registration().world_size(), " registered by agent '", id, "'"));
    }
    break;
  }
  // Every part of an epoch reports the same model (0: unknown).
  const falcon::v1::JobRegistration* own = nullptr;
  if (auto it = parts_.find(agent_id); it != parts_.end()) own = &it->second.registration();
  if (util::MaybeFieldError e = SameModelField(
          parts_, epoch(), path, "pipeline_blocks", agent_id, reg.pipeline_blocks(),
          own == nullptr ? 0 : own->pipeline_blocks(), pipeline_blocks_,
          [](const falcon::v1::JobRegistration& r) { return r.pipeline_blocks(); })) {
    return e;
  }
  if (util::MaybeFieldError e = SameModelField(
          parts_, epoch(), path, "block_state_bytes", agent_id, reg.block_state_bytes(),
          own == nullptr ? 0 : own->block_state_bytes(), block_state_bytes_,
          [](const falcon::v1::JobRegistration& r) { return r.block_state_bytes(); })) {
    return e;
  }
  for (int i = 0; i < reg.communicators_size(); ++i) {
    const falcon::v1::Communicator& mine = reg.communicators(i);
    auto it = comms_.find(mine.comm_id());
    if (it == comms_.end()) continue;
    const std::string* other = nullptr;
    for (const auto& [id, given] : it->second.registrants) {
      if (id != agent_id) {
        other = &id;
        break;
      }
    }
    if (other == nullptr) continue;
    const auto& theirs = it->second.comm.member_ranks();
    if (!std::equal(mine.member_ranks().begin(), mine.member_ranks().end(), theirs.begin(),
                    theirs.end())) {
      return util::MakeFieldError(
          util::Indexed(path + ".communicators", i) + ".member_ranks",
          absl::StrCat("comm ", mine.comm_id(), " members [",
                       absl::StrJoin(mine.member_ranks(), ","), "] differ from [",
                       absl::StrJoin(theirs, ","), "] registered by agent '", *other, "'"));
    }
  }
  return std::nullopt;
}

void JobEntry::MergePart(const std::string& agent_id, const std::string& node,
                         const falcon::v1::JobRegistration& reg, PartChanges* changes) {
  // A newer epoch starts the job's layout over: parts of older epochs are dropped.
  if (!parts_.empty() && reg.epoch() > epoch()) {
    std::vector<std::string> older;
    for (const auto& [id, part] : parts_) {
      if (part.registration().epoch() < reg.epoch()) older.push_back(id);
    }
    for (const std::string& id : older) {
      changes->parts.emplace_back(id, parts_.at(id));
      SetPart(id, std::nullopt, &changes->removed_traffic);
    }
  }
  TakeRanks(agent_id, reg, changes);
  auto it = parts_.find(agent_id);
  changes->parts.emplace_back(
      agent_id, it == parts_.end() ? std::nullopt : std::optional<AgentJob>(it->second));
  AgentJob part;
  part.set_agent_id(agent_id);
  part.set_node(node);
  *part.mutable_registration() = reg;
  SetPart(agent_id, std::move(part), &changes->removed_traffic);
  record_.set_ended_time_ns(0);
  Refresh();
}

void JobEntry::Revert(PartChanges changes) {
  for (auto it = changes.parts.rbegin(); it != changes.parts.rend(); ++it) {
    SetPart(it->first, std::move(it->second));
  }
  for (const auto& [id, traffic] : changes.removed_traffic) {
    auto c = comms_.find(id);
    if (c == comms_.end()) continue;
    c->second.traffic = traffic;
    dirty_.insert(id);
  }
  Refresh();
}

bool JobEntry::RemoveAgent(const std::string& agent_id) {
  if (!HasPart(agent_id)) return false;
  SetPart(agent_id, std::nullopt);
  Refresh();
  return true;
}

void JobEntry::TakeRanks(const std::string& agent_id, const falcon::v1::JobRegistration& reg,
                         PartChanges* changes) {
  std::map<std::string, std::set<uint32_t>> taken;  // Owner -> its ranks `reg` lists.
  for (const falcon::v1::RankInfo& r : reg.ranks()) {
    auto it = rank_slots_.find(r.rank());
    if (it != rank_slots_.end() && it->second.agent != agent_id) {
      taken[it->second.agent].insert(r.rank());
    }
  }
  for (const auto& [owner, owned] : taken) {
    const std::set<uint32_t>& ranks = owned;  // A lambda may not capture a structured binding.
    AgentJob part = parts_.at(owner);
    changes->parts.emplace_back(owner, part);
    auto* list = part.mutable_registration()->mutable_ranks();
    list->erase(
        std::remove_if(list->begin(), list->end(),
                       [&](const falcon::v1::RankInfo& r) { return ranks.count(r.rank()); }),
        list->end());
    SetPart(owner, std::move(part), &changes->removed_traffic);
  }
}

void JobEntry::SetPart(const std::string& agent_id, std::optional<AgentJob> part,
                       std::vector<std::pair<uint64_t, CommTraffic>>* removed) {
  std::optional<AgentJob> prev;
  if (auto it = parts_.find(agent_id); it != parts_.end()) {
    prev = std::move(it->second);
    parts_.erase(it);
  }
  const falcon::v1::JobRegistration* before = prev ? &prev->registration() : nullptr;
  const falcon::v1::JobRegistration* after = nullptr;
  if (part.has_value()) {
    after = &parts_.insert_or_assign(agent_id, std::move(*part)).first->second.registration();
  }
  for (const falcon::v1::JobRegistration* reg : {before, after}) {
    if (reg == nullptr) continue;
    const int by = reg == before ? -1 : 1;
    Bump(&epochs_, reg->epoch(), by);
    Bump(&dp_hints_, reg->dp_size(), by);
    Bump(&pp_hints_, reg->pp_size(), by);
    Bump(&tp_hints_, reg->tp_size(), by);
    Bump(&pipeline_blocks_, reg->pipeline_blocks(), by);
    Bump(&block_state_bytes_, reg->block_state_bytes(), by);
  }
  if (before != nullptr) {
    absl::flat_hash_set<uint32_t> kept_ranks;
    absl::flat_hash_set<uint64_t> kept_comms;
    if (after != nullptr) {
      for (const falcon::v1::RankInfo& r : after->ranks()) kept_ranks.insert(r.rank());
      for (const falcon::v1::Communicator& c : after->communicators()) {
        kept_comms.insert(c.comm_id());
      }
    }
    for (const falcon::v1::RankInfo& r : before->ranks()) {
      if (!kept_ranks.count(r.rank())) ReleaseRank(agent_id, r.rank());
    }
    for (const falcon::v1::Communicator& c : before->communicators()) {
      if (!kept_comms.count(c.comm_id())) LeaveComm(agent_id, c.comm_id(), removed);
    }
  }
  if (after != nullptr) {
    for (const falcon::v1::Communicator& c : after->communicators()) JoinComm(agent_id, c);
    for (const falcon::v1::RankInfo& r : after->ranks()) TakeRank(agent_id, r);
  }
}

void JobEntry::TakeRank(const std::string& agent_id, const falcon::v1::RankInfo& rank) {
  auto [it, inserted] = rank_slots_.try_emplace(rank.rank());
  RankSlot& slot = it->second;
  if (inserted) {
    ranks_.insert(std::lower_bound(ranks_.begin(), ranks_.end(), rank.rank()), rank.rank());
  } else {
    Bump(&node_ranks_, slot.info.node(), -1);
  }
  const bool moved = inserted || slot.info.node() != rank.node();
  slot.agent = agent_id;
  slot.info = rank;
  Bump(&node_ranks_, rank.node(), 1);
  if (moved) SetMemberNode(rank.rank(), rank.node());
}

void JobEntry::ReleaseRank(const std::string& agent_id, uint32_t rank) {
  auto it = rank_slots_.find(rank);
  if (it == rank_slots_.end() || it->second.agent != agent_id) return;
  Bump(&node_ranks_, it->second.info.node(), -1);
  rank_slots_.erase(it);
  auto pos = std::lower_bound(ranks_.begin(), ranks_.end(), rank);
  if (pos != ranks_.end() && *pos == rank) ranks_.erase(pos);
  SetMemberNode(rank, "");
}

void JobEntry::SetMembers(uint64_t comm_id, CommInfo* info, const falcon::v1::Communicator& comm) {
  for (uint32_t m : info->sorted_members) {
    auto rc = rank_comms_.find(m);
    if (rc == rank_comms_.end()) continue;
    rc->second.erase(std::remove(rc->second.begin(), rc->second.end(), comm_id), rc->second.end());
    if (rc->second.empty()) rank_comms_.erase(rc);
  }
  *info->comm.mutable_member_ranks() = comm.member_ranks();
  info->sorted_members.assign(comm.member_ranks().begin(), comm.member_ranks().end());
  std::sort(info->sorted_members.begin(), info->sorted_members.end());
  info->member_nodes.clear();
  for (uint32_t m : comm.member_ranks()) {
    auto slot = rank_slots_.find(m);
    info->member_nodes.push_back(slot == rank_slots_.end() ? "" : slot->second.info.node());
  }
  for (uint32_t m : info->sorted_members) rank_comms_[m].push_back(comm_id);
  dirty_.insert(comm_id);
}

void JobEntry::JoinComm(const std::string& agent_id, const falcon::v1::Communicator& comm) {
  auto [it, inserted] = comms_.try_emplace(comm.comm_id());
  CommInfo& info = it->second;
  info.registrants[agent_id] = {comm.kind(), comm.name()};
  if (inserted) {
    info.comm = comm;
    info.comm.set_kind(falcon::v1::COMM_KIND_UNKNOWN);
    info.sorted_members.clear();
    SetMembers(comm.comm_id(), &info, comm);
  } else if (!std::equal(comm.member_ranks().begin(), comm.member_ranks().end(),
                         info.comm.member_ranks().begin(), info.comm.member_ranks().end())) {
    SetMembers(comm.comm_id(), &info, comm);  // Its only registrant changed it.
  }
  if (!inserted && !Known(info.hint)) --unhinted_comms_;
  FromRegistrants(&info);
  if (!Known(info.hint)) ++unhinted_comms_;
  dirty_.insert(comm.comm_id());
}

void JobEntry::LeaveComm(const std::string& agent_id, uint64_t comm_id,
                         std::vector<std::pair<uint64_t, CommTraffic>>* removed) {
  auto it = comms_.find(comm_id);
  if (it == comms_.end()) return;
  CommInfo& info = it->second;
  info.registrants.erase(agent_id);
  if (!Known(info.hint)) --unhinted_comms_;
  if (!info.registrants.empty()) {
    FromRegistrants(&info);
    if (!Known(info.hint)) ++unhinted_comms_;
    dirty_.insert(comm_id);
    return;
  }
  if (removed != nullptr) removed->emplace_back(comm_id, info.traffic);
  Uncount(&info);
  if (info.spans_nodes) --spanning_comms_;
  for (uint32_t m : info.sorted_members) {
    auto rc = rank_comms_.find(m);
    if (rc == rank_comms_.end()) continue;
    rc->second.erase(std::remove(rc->second.begin(), rc->second.end(), comm_id), rc->second.end());
    if (rc->second.empty()) rank_comms_.erase(rc);
  }
  dirty_.erase(comm_id);
  comms_.erase(it);
}

void JobEntry::SetMemberNode(uint32_t rank, const std::string& node) {
  auto rc = rank_comms_.find(rank);
  if (rc == rank_comms_.end()) return;
  for (uint64_t id : rc->second) {
    CommInfo& info = comms_.at(id);
    for (int i = 0; i < info.comm.member_ranks_size(); ++i) {
      if (info.comm.member_ranks(i) == rank) info.member_nodes[i] = node;
    }
    dirty_.insert(id);
  }
}

void JobEntry::Uncount(CommInfo* c) {
  if (c->counted_kind < 0) return;
  auto it = kind_sizes_.find(c->counted_kind);
  if (it != kind_sizes_.end()) {
    Bump(&it->second, c->counted_size, -1);
    if (it->second.empty()) kind_sizes_.erase(it);
  }
  c->counted_kind = -1;
  c->counted_size = 0;
}

void JobEntry::Refresh() {
  falcon::v1::Job* job = record_.mutable_job();
  if (!parts_.empty()) {
    const falcon::v1::JobRegistration& any = parts_.begin()->second.registration();
    if (!any.job().empty()) job->set_job(any.job());
    job->set_world_size(any.world_size());
  }
  job->set_epoch(Largest(epochs_));
  job->set_pipeline_blocks(Largest(pipeline_blocks_));
  job->set_block_state_bytes(Largest(block_state_bytes_));
  for (uint64_t id : dirty_) {
    CommInfo& info = comms_.at(id);
    info.one_node = OnOneNode(info.member_nodes);
    const bool spans = SpansNodes(info.member_nodes);
    if (spans != info.spans_nodes) spanning_comms_ += spans ? 1 : -1;
    info.spans_nodes = spans;
  }
  RoleContext context;
  context.world_size = job->world_size();
  context.hinted.dp = Largest(dp_hints_);
  context.hinted.pp = Largest(pp_hints_);
  context.hinted.tp = Largest(tp_hints_);
  context.any_spans_nodes = spanning_comms_ > 0;
  auto infer = [&](CommInfo& info) {
    const uint32_t size = static_cast<uint32_t>(info.sorted_members.size());
    const falcon::v1::CommKind kind =
        InferRole(info.hint, size, info.traffic, info.one_node, context);
    if (info.counted_kind == kind && info.counted_size == size) return;
    Uncount(&info);
    info.comm.set_kind(kind);
    Bump(&kind_sizes_[kind], size, 1);
    info.counted_kind = kind;
    info.counted_size = size;
  };
  if (!SameContext(context, context_)) {
    for (auto& [id, info] : comms_) infer(info);
  } else {
    for (uint64_t id : dirty_) infer(comms_.at(id));
  }
  dirty_.clear();
  context_ = context;
  auto largest = [&](falcon::v1::CommKind k) -> uint32_t {
    auto it = kind_sizes_.find(k);
    return it == kind_sizes_.end() ? 0 : Largest(it->second);
  };
  const LayoutSizes layout =
      CompleteLayout(context.world_size, context.hinted, largest(falcon::v1::COMM_KIND_DP),
                     largest(falcon::v1::COMM_KIND_TP));
  job->set_dp_size(layout.dp);
  job->set_pp_size(layout.pp);
  job->set_tp_size(layout.tp);
}

falcon::v1::JobRegistration WithEarlierPart(const JobEntry& job, const std::string& agent_id,
                                            falcon::v1::JobRegistration reg) {
  auto it = job.parts().find(agent_id);
  if (it == job.parts().end()) return reg;
  const falcon::v1::JobRegistration& earlier = it->second.registration();
  if (earlier.epoch() != reg.epoch() || earlier.world_size() != reg.world_size()) return reg;
  std::set<uint32_t> ranks;
  for (const falcon::v1::RankInfo& r : reg.ranks()) ranks.insert(r.rank());
  for (const falcon::v1::RankInfo& r : earlier.ranks()) {
    if (ranks.insert(r.rank()).second) *reg.add_ranks() = r;
  }
  std::set<uint64_t> comms;
  for (const falcon::v1::Communicator& c : reg.communicators()) comms.insert(c.comm_id());
  for (const falcon::v1::Communicator& c : earlier.communicators()) {
    if (comms.insert(c.comm_id()).second) *reg.add_communicators() = c;
  }
  if (reg.dp_size() == 0) reg.set_dp_size(earlier.dp_size());
  if (reg.pp_size() == 0) reg.set_pp_size(earlier.pp_size());
  if (reg.tp_size() == 0) reg.set_tp_size(earlier.tp_size());
  if (reg.global_micro_batches() == 0) {
    reg.set_global_micro_batches(earlier.global_micro_batches());
  }
  if (reg.pipeline_blocks() == 0) reg.set_pipeline_blocks(earlier.pipeline_blocks());
  if (reg.block_state_bytes() == 0) reg.set_block_state_bytes(earlier.block_state_bytes());
  return reg;
}

void JobRegistry::Load(const std::vector<JobRecord>& records,
                       const std::vector<std::pair<std::string, AgentJob>>& parts,
                       store::StoreTxn* upgrade) {
  jobs_.clear();
  agent_jobs_.clear();
  absl::flat_hash_map<std::string, std::vector<const AgentJob*>> by_job;
  for (const auto& [job, part] : parts) by_job[job].push_back(&part);
  for (const JobRecord& stored : records) {
    const bool whole = stored.agents_size() > 0;  // Written by an earlier version.
    JobRecord r = stored;
    if (auto it = by_job.find(r.job().job()); it != by_job.end()) {
      for (const AgentJob* part : it->second) *r.add_agents() = *part;
    }
    auto entry = std::make_unique<JobEntry>(std::move(r));
    const std::string name = entry->name();
    for (const auto& [id, part] : entry->parts()) Index(name, id, true);
    if (whole && upgrade != nullptr) {
      upgrade->PutJob(entry->record());
      for (const auto& [id, part] : entry->parts()) StagePart(*entry, id, upgrade);
    }
    jobs_[name] = std::move(entry);
  }
}

void JobRegistry::Index(const std::string& job, const std::string& agent_id, bool add) {
  if (add) {
    agent_jobs_[agent_id].insert(job);
    return;
  }
  auto it = agent_jobs_.find(agent_id);
  if (it == agent_jobs_.end()) return;
  it->second.erase(job);
  if (it->second.empty()) agent_jobs_.erase(it);
}

void JobRegistry::StagePart(const JobEntry& entry, const std::string& agent_id,
                            store::StoreTxn* txn) const {
  auto it = entry.parts().find(agent_id);
  if (it == entry.parts().end()) {
    txn->DeleteJobPart(entry.name(), agent_id);
  } else {
    txn->PutJobPart(entry.name(), it->second);
  }
}

util::MaybeFieldError JobRegistry::Check(const std::string& agent_id,
                                         const falcon::v1::JobRegistration& reg,
                                         const std::string& path) const {
  const JobEntry* existing = Find(reg.job());
  return existing == nullptr ? std::nullopt : existing->CheckPart(agent_id, reg, path);
}

util::MaybeFieldError JobRegistry::Register(const std::string& agent_id, const std::string& node,
                                            const falcon::v1::JobRegistration& reg,
                                            const std::string& path, store::StoreTxn* txn,
                                            JobEntry** out, RegistrationUndo* undo) {
  if (util::MaybeFieldError e = Check(agent_id, reg, path)) return e;
  RegistrationUndo done;
  done.job = reg.job();
  auto& slot = jobs_[reg.job()];
  done.created = slot == nullptr;
  if (slot == nullptr) slot = std::make_unique<JobEntry>(reg.job());
  JobEntry* entry = slot.get();
  done.record = entry->record();
  entry->MergePart(agent_id, node, reg, &done.changes);
  txn->PutJob(entry->record());
  for (const auto& [id, before] : done.changes.parts) {
    Index(entry->name(), id, entry->HasPart(id));
    StagePart(*entry, id, txn);
  }
  if (out != nullptr) *out = entry;
  if (undo != nullptr) *undo = std::move(done);
  return std::nullopt;
}

void JobRegistry::Undo(RegistrationUndo undo) {
  auto it = jobs_.find(undo.job);
  if (it == jobs_.end()) return;
  JobEntry* entry = it->second.get();
  std::vector<std::string> ids;
  for (const auto& [id, before] : undo.changes.parts) ids.push_back(id);
  if (undo.created) {
    for (const std::string& id : ids) Index(undo.job, id, false);
    jobs_.erase(it);
    return;
  }
  entry->Revert(std::move(undo.changes));
  entry->set_ended_time_ns(undo.record.ended_time_ns());
  entry->set_state(undo.record.job().state());
  for (const std::string& id : ids) Index(undo.job, id, entry->HasPart(id));
}

JobEntry* JobRegistry::RemoveAgent(const std::string& job, const std::string& agent_id,
                                   store::StoreTxn* txn) {
  JobEntry* entry = Find(job);
  if (entry == nullptr) return nullptr;
  if (entry->RemoveAgent(agent_id)) {
    Index(job, agent_id, false);
    txn->PutJob(entry->record());
    txn->DeleteJobPart(job, agent_id);
  }
  return entry;
}

bool JobRegistry::Remove(const std::string& job) {
  auto it = jobs_.find(job);
  if (it == jobs_.end()) return false;
  for (const auto& [id, part] : it->second->parts()) Index(job, id, false);
  jobs_.erase(it);
  return true;
}

void JobRegistry::Persist(const JobEntry& entry, store::StoreTxn* txn) const {
  txn->PutJob(entry.record());
}

JobEntry* JobRegistry::Find(const std::string& job) {
  auto it = jobs_.find(job);
  return it == jobs_.end() ? nullptr : it->second.get();
}

const JobEntry* JobRegistry::Find(const std::string& job) const {
  auto it = jobs_.find(job);
  return it == jobs_.end() ? nullptr : it->second.get();
}

std::vector<std::string> JobRegistry::JobNames() const {
  std::vector<std::string> names;
  names.reserve(jobs_.size());
  for (const auto& [name, entry] : jobs_) names.push_back(name);  // btree: already sorted.
  return names;
}

std::vector<const JobEntry*> JobRegistry::JobsAfter(const std::string& after, size_t max) const {
  std::vector<const JobEntry*> out;
  for (auto it = after.empty() ? jobs_.begin() : jobs_.upper_bound(after);
       it != jobs_.end() && out.size() < max; ++it) {
    out.push_back(it->second.get());
  }
  return out;
}

std::vector<std::string> JobRegistry::JobsOfAgent(const std::string& agent_id) const {
  std::vector<std::string> out;
  auto it = agent_jobs_.find(agent_id);
  if (it == agent_jobs_.end()) return out;
  out.assign(it->second.begin(), it->second.end());
  std::sort(out.begin(), out.end());
  return out;
}

size_t JobRegistry::JobCountOfAgent(const std::string& agent_id) const {
  auto it = agent_jobs_.find(agent_id);
  return it == agent_jobs_.end() ? 0 : it->second.size();
}

}  // namespace falcon::controller::registry
