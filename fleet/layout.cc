#include "fleet/layout.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"

namespace falcon::fleet {

uint64_t TpComm(const Layout& l, uint32_t r) { return l.tp > 1 ? kCommBase + r / l.tp : 0; }

uint64_t DpComm(const Layout& l, uint32_t r) {
  return l.dp > 1 ? 2 * kCommBase + l.pp_index(r) * l.tp + l.tp_index(r) : 0;
}

uint64_t PpComm(const Layout& l, uint32_t r) {
  return l.pp > 1 ? 3 * kCommBase + l.dp_index(r) * l.tp + l.tp_index(r) : 0;
}

std::vector<uint32_t> CommMembers(const Layout& l, uint64_t comm_id) {
  std::vector<uint32_t> m;
  const uint64_t kind = comm_id / kCommBase;
  const uint64_t index = comm_id % kCommBase;
  if (comm_id == kWorldComm) {
    for (uint32_t r = 0; r < l.world(); ++r) m.push_back(r);
  } else if (kind == 1 && l.tp > 1 && index < uint64_t{l.pp} * l.dp) {
    for (uint32_t t = 0; t < l.tp; ++t) m.push_back(static_cast<uint32_t>(index) * l.tp + t);
  } else if (kind == 2 && l.dp > 1 && index < uint64_t{l.pp} * l.tp) {
    const uint32_t stage = static_cast<uint32_t>(index) / l.tp;
    const uint32_t t = static_cast<uint32_t>(index) % l.tp;
    for (uint32_t d = 0; d < l.dp; ++d) m.push_back(l.Rank(stage, d, t));
  } else if (kind == 3 && l.pp > 1 && index < uint64_t{l.dp} * l.tp) {
    const uint32_t d = static_cast<uint32_t>(index) / l.tp;
    const uint32_t t = static_cast<uint32_t>(index) % l.tp;
    for (uint32_t p = 0; p < l.pp; ++p) m.push_back(l.Rank(p, d, t));
  }
  return m;
}

std::string NodeName(const Layout& l, uint32_t node) { return absl::StrCat(l.job, "-n", node); }

std::vector<uint32_t> RanksOfNode(const Layout& l, uint32_t node) {
  std::vector<uint32_t> ranks;
  for (uint32_t r = node * l.ranks_per_node; r < std::min(l.world(), (node + 1) * l.ranks_per_node);
       ++r) {
    ranks.push_back(r);
  }
  return ranks;
}

falcon::v1::JobRegistration NodeRegistration(const Layout& l, uint32_t node) {
  falcon::v1::JobRegistration reg;
  reg.set_job(l.job);
  reg.set_world_size(l.world());
  reg.set_epoch(l.epoch);
  reg.set_dp_size(l.dp);
  reg.set_pp_size(l.pp);
  reg.set_tp_size(l.tp);
  const std::vector<uint32_t> mine = RanksOfNode(l, node);
  std::set<uint64_t> comms = {kWorldComm};
  for (uint32_t r : mine) {
    falcon::v1::RankInfo* info = reg.add_ranks();
    info->set_rank(r);
    info->set_node(NodeName(l, node));
    info->set_local_rank(r - node * l.ranks_per_node);
    info->set_gpu(static_cast<int32_t>(r - node * l.ranks_per_node));
    info->set_pid(static_cast<int32_t>(1000 + r % 100000));
    info->set_dp_index(static_cast<int32_t>(l.dp_index(r)));
    info->set_pp_index(static_cast<int32_t>(l.pp_index(r)));
    info->set_tp_index(static_cast<int32_t>(l.tp_index(r)));
    for (uint64_t c : {TpComm(l, r), DpComm(l, r), PpComm(l, r)}) {
      if (c != 0) comms.insert(c);
    }
  }
  for (uint64_t id : comms) {
    falcon::v1::Communicator* c = reg.add_communicators();
    c->set_comm_id(id);
    const uint64_t kind = id / kCommBase;
    c->set_kind(id == kWorldComm ? falcon::v1::COMM_KIND_WORLD
                : kind == 1      ? falcon::v1::COMM_KIND_TP
                : kind == 2      ? falcon::v1::COMM_KIND_DP
                                 : falcon::v1::COMM_KIND_PP);
    c->set_name(id == kWorldComm ? "world"
                                 : absl::StrCat(kind == 1   ? "tp"
                                                : kind == 2 ? "dp"
                                                            : "pp",
                                                id % kCommBase));
    for (uint32_t m : CommMembers(l, id)) c->add_member_ranks(m);
  }
  return reg;
}

}  // namespace falcon::fleet
