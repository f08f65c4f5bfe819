#include "controller/registry/job_registry.h"

#include <algorithm>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace falcon::controller::registry {

using falcon::controller::v1::AgentJob;
using falcon::controller::v1::JobRecord;

bool CommInfo::HasMember(uint32_t rank) const {
  return std::binary_search(sorted_members.begin(), sorted_members.end(), rank);
}

JobEntry::JobEntry(JobRecord record) : record_(std::move(record)) { Rebuild(); }

const CommInfo* JobEntry::FindComm(uint64_t comm_id) const {
  auto it = comms_.find(comm_id);
  return it == comms_.end() ? nullptr : &it->second;
}

const falcon::v1::RankInfo* JobEntry::FindRank(uint32_t rank) const {
  auto it = rank_index_.find(rank);
  return it == rank_index_.end() ? nullptr : &record_.job().ranks(it->second);
}

const std::string* JobEntry::AgentOfRank(uint32_t rank) const {
  auto it = rank_agent_.find(rank);
  return it == rank_agent_.end() ? nullptr : &record_.agents(it->second).agent_id();
}

std::vector<std::string> JobEntry::AgentIds() const {
  std::vector<std::string> ids;
  for (const AgentJob& a : record_.agents()) ids.push_back(a.agent_id());
  return ids;
}

std::vector<const CommInfo*> JobEntry::CommsOfRank(uint32_t rank) const {
  std::vector<const CommInfo*> out;
  for (const auto& [id, c] : comms_) {
    if (c.HasMember(rank)) out.push_back(&c);
  }
  std::sort(out.begin(), out.end(), [](const CommInfo* a, const CommInfo* b) {
    return a->comm.comm_id() < b->comm.comm_id();
  });
  return out;
}

bool JobEntry::ObserveTraffic(uint64_t comm_id, uint64_t p2p_ops, uint64_t collective_ops) {
  auto it = comms_.find(comm_id);
  if (it == comms_.end()) return false;
  it->second.traffic.p2p_ops += p2p_ops;
  it->second.traffic.collective_ops += collective_ops;
  std::vector<falcon::v1::CommKind> before;
  for (const falcon::v1::Communicator& c : record_.job().communicators())
    before.push_back(c.kind());
  Infer();
  for (int i = 0; i < record_.job().communicators_size(); ++i) {
    if (record_.job().communicators(i).kind() != before[i]) return true;
  }
  return false;
}

util::MaybeFieldError JobEntry::MergeFrom(const std::string& agent_id, const std::string& node,
                                          const falcon::v1::JobRegistration& reg,
                                          const std::string& path) {
  const bool fresh = record_.agents().empty();
  if (!fresh && reg.epoch() < epoch()) {
    return util::MakeFieldError(
        path + ".epoch", absl::StrCat(reg.epoch(), " is older than the job's epoch ", epoch()));
  }
  // A newer epoch starts the job's layout over: parts of older epochs are dropped.
  if (!fresh && reg.epoch() > epoch()) {
    auto* agents = record_.mutable_agents();
    agents->erase(
        std::remove_if(agents->begin(), agents->end(),
                       [&](const AgentJob& a) { return a.registration().epoch() < reg.epoch(); }),
        agents->end());
  }
  for (const AgentJob& other : record_.agents()) {
    if (other.agent_id() == agent_id) continue;
    if (other.registration().world_size() != reg.world_size()) {
      return util::MakeFieldError(path + ".world_size",
                                  absl::StrCat(reg.world_size(), " conflicts with world_size ",
                                               other.registration().world_size(),
                                               " registered by agent '", other.agent_id(), "'"));
    }
    for (int i = 0; i < reg.communicators_size(); ++i) {
      const falcon::v1::Communicator& mine = reg.communicators(i);
      for (const falcon::v1::Communicator& theirs : other.registration().communicators()) {
        if (theirs.comm_id() != mine.comm_id()) continue;
        if (!std::equal(mine.member_ranks().begin(), mine.member_ranks().end(),
                        theirs.member_ranks().begin(), theirs.member_ranks().end())) {
          return util::MakeFieldError(
              util::Indexed(path + ".communicators", i) + ".member_ranks",
              absl::StrCat("comm ", mine.comm_id(), " members [",
                           absl::StrJoin(mine.member_ranks(), ","), "] differ from [",
                           absl::StrJoin(theirs.member_ranks(), ","), "] registered by agent '",
                           other.agent_id(), "'"));
        }
      }
    }
  }
  // Last writer wins for rank ownership.
  std::set<uint32_t> mine;
  for (const falcon::v1::RankInfo& r : reg.ranks()) mine.insert(r.rank());
  for (AgentJob& other : *record_.mutable_agents()) {
    if (other.agent_id() == agent_id) continue;
    auto* ranks = other.mutable_registration()->mutable_ranks();
    ranks->erase(
        std::remove_if(ranks->begin(), ranks->end(),
                       [&](const falcon::v1::RankInfo& r) { return mine.count(r.rank()); }),
        ranks->end());
  }
  AgentJob* part = nullptr;
  for (AgentJob& a : *record_.mutable_agents()) {
    if (a.agent_id() == agent_id) part = &a;
  }
  if (part == nullptr) part = record_.add_agents();
  part->set_agent_id(agent_id);
  part->set_node(node);
  *part->mutable_registration() = reg;
  record_.set_ended_time_ns(0);
  Rebuild();
  return std::nullopt;
}

bool JobEntry::RemoveAgent(const std::string& agent_id) {
  auto* agents = record_.mutable_agents();
  auto it = std::remove_if(agents->begin(), agents->end(),
                           [&](const AgentJob& a) { return a.agent_id() == agent_id; });
  if (it == agents->end()) return false;
  agents->erase(it, agents->end());
  Rebuild();
  return true;
}

falcon::v1::JobRegistration WithEarlierPart(const JobEntry& job, const std::string& agent_id,
                                            falcon::v1::JobRegistration reg) {
  for (const AgentJob& a : job.record().agents()) {
    if (a.agent_id() != agent_id) continue;
    const falcon::v1::JobRegistration& earlier = a.registration();
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
    return reg;
  }
  return reg;
}

void JobEntry::Rebuild() {
  falcon::v1::Job* job = record_.mutable_job();
  const falcon::v1::JobState state = job->state();
  job->clear_ranks();
  job->clear_communicators();
  job->clear_nodes();
  ranks_.clear();
  rank_index_.clear();
  rank_agent_.clear();
  absl::flat_hash_map<uint64_t, CommTraffic> traffic;
  for (const auto& [id, c] : comms_) traffic[id] = c.traffic;
  comms_.clear();

  uint32_t dp = 0, pp = 0, tp = 0;
  uint64_t epoch = 0;
  std::vector<falcon::v1::RankInfo> ranks;
  std::set<std::string> nodes;
  for (int a = 0; a < record_.agents_size(); ++a) {
    const falcon::v1::JobRegistration& reg = record_.agents(a).registration();
    if (!reg.job().empty()) job->set_job(reg.job());
    job->set_world_size(reg.world_size());
    dp = std::max(dp, reg.dp_size());
    pp = std::max(pp, reg.pp_size());
    tp = std::max(tp, reg.tp_size());
    epoch = std::max(epoch, reg.epoch());
    for (const falcon::v1::RankInfo& r : reg.ranks()) {
      ranks.push_back(r);
      rank_agent_[r.rank()] = a;
      nodes.insert(r.node());
    }
    for (const falcon::v1::Communicator& c : reg.communicators()) {
      auto [it, inserted] = comms_.try_emplace(c.comm_id());
      CommInfo& info = it->second;
      if (inserted) {
        info.comm = c;
        info.hint = c.kind();
        info.sorted_members.assign(c.member_ranks().begin(), c.member_ranks().end());
        std::sort(info.sorted_members.begin(), info.sorted_members.end());
      } else if ((info.hint == falcon::v1::COMM_KIND_UNKNOWN ||
                  info.hint == falcon::v1::COMM_KIND_UNSPECIFIED) &&
                 c.kind() != falcon::v1::COMM_KIND_UNKNOWN &&
                 c.kind() != falcon::v1::COMM_KIND_UNSPECIFIED) {
        info.hint = c.kind();
      }
      if (info.comm.name().empty()) info.comm.set_name(c.name());
    }
  }
  std::sort(ranks.begin(), ranks.end(),
            [](const auto& a, const auto& b) { return a.rank() < b.rank(); });
  for (const falcon::v1::RankInfo& r : ranks) {
    rank_index_[r.rank()] = job->ranks_size();
    ranks_.push_back(r.rank());
    *job->add_ranks() = r;
  }
  for (const std::string& n : nodes) job->add_nodes(n);
  job->set_epoch(epoch);
  job->set_dp_size(dp);
  job->set_pp_size(pp);
  job->set_tp_size(tp);
  job->set_state(state == falcon::v1::JOB_STATE_UNSPECIFIED ? falcon::v1::JOB_STATE_TRACKING
                                                            : state);
  for (auto& [id, c] : comms_) {
    auto t = traffic.find(id);
    if (t != traffic.end()) c.traffic = t->second;
    c.member_nodes.clear();
    for (uint32_t m : c.comm.member_ranks()) {
      const falcon::v1::RankInfo* r = FindRank(m);
      c.member_nodes.push_back(r ? r->node() : "");
    }
  }
  Infer();
}

void JobEntry::Infer() {
  std::vector<uint64_t> ids;
  for (const auto& [id, c] : comms_) ids.push_back(id);
  std::sort(ids.begin(), ids.end());
  std::vector<CommForInference> input;
  for (uint64_t id : ids) {
    const CommInfo& c = comms_.at(id);
    CommForInference in;
    in.comm_id = id;
    in.hint = c.hint;
    in.members.assign(c.comm.member_ranks().begin(), c.comm.member_ranks().end());
    in.member_nodes = c.member_nodes;
    in.traffic = c.traffic;
    input.push_back(std::move(in));
  }
  LayoutSizes hinted;
  uint32_t dp = 0, pp = 0, tp = 0;
  for (const AgentJob& a : record_.agents()) {
    dp = std::max(dp, a.registration().dp_size());
    pp = std::max(pp, a.registration().pp_size());
    tp = std::max(tp, a.registration().tp_size());
  }
  hinted.dp = dp;
  hinted.pp = pp;
  hinted.tp = tp;
  RoleInferenceResult result = InferRoles(world_size(), input, hinted);
  falcon::v1::Job* job = record_.mutable_job();
  job->clear_communicators();
  for (size_t i = 0; i < ids.size(); ++i) {
    CommInfo& c = comms_.at(ids[i]);
    c.comm.set_kind(result.kinds[i]);
    *job->add_communicators() = c.comm;
  }
  job->set_dp_size(result.layout.dp);
  job->set_pp_size(result.layout.pp);
  job->set_tp_size(result.layout.tp);
}

void JobRegistry::Load(const std::vector<JobRecord>& records) {
  jobs_.clear();
  agent_jobs_.clear();
  for (const JobRecord& r : records) {
    auto& slot = jobs_[r.job().job()];
    if (slot != nullptr) IndexAgents(*slot, false);
    slot = std::make_unique<JobEntry>(r);
    IndexAgents(*slot, true);
  }
}

void JobRegistry::IndexAgents(const JobEntry& entry, bool add) {
  for (const AgentJob& a : entry.record().agents()) {
    if (add) {
      agent_jobs_[a.agent_id()].insert(entry.name());
      continue;
    }
    auto it = agent_jobs_.find(a.agent_id());
    if (it == agent_jobs_.end()) continue;
    it->second.erase(entry.name());
    if (it->second.empty()) agent_jobs_.erase(it);
  }
}

util::MaybeFieldError JobRegistry::Merge(const std::string& agent_id, const std::string& node,
                                         const falcon::v1::JobRegistration& reg,
                                         const std::string& path,
                                         std::optional<JobEntry>* out) const {
  const JobEntry* existing = Find(reg.job());
  JobEntry entry = existing ? *existing : JobEntry(JobRecord());
  if (util::MaybeFieldError e = entry.MergeFrom(agent_id, node, reg, path)) return e;
  out->emplace(std::move(entry));
  return std::nullopt;
}

JobEntry* JobRegistry::Install(JobEntry entry, store::StoreTxn* txn) {
  Persist(entry, txn);
  auto& slot = jobs_[entry.name()];
  if (slot != nullptr) IndexAgents(*slot, false);
  slot = std::make_unique<JobEntry>(std::move(entry));
  IndexAgents(*slot, true);
  return slot.get();
}

bool JobRegistry::Remove(const std::string& job) {
  auto it = jobs_.find(job);
  if (it == jobs_.end()) return false;
  IndexAgents(*it->second, false);
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
