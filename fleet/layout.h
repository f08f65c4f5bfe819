// Hybrid-parallel layouts (TP x PP x DP) of simulated fleet jobs: rank numbering, nodes and the
// communicators each rank is a member of, built in O(ranks of a node) per node so that a
// 16,384-rank job registers quickly.
//
// Rank r = ((pp_index * dp) + dp_index) * tp + tp_index: a TP group is `tp` consecutive ranks (one
// node when ranks_per_node == tp). Communicators: the world (id 1); TP communicators
// (id 2^32 + group); DP communicators, one per (stage, tp index) (id 2 * 2^32 + stage * tp +
// tp_index); PP chains, one per (replica, tp index) (id 3 * 2^32 + replica * tp + tp_index).
// Groups of one member are left out.
#ifndef FALCON_FLEET_LAYOUT_H_
#define FALCON_FLEET_LAYOUT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "proto/falcon/v1/telemetry.pb.h"

namespace falcon::fleet {

struct Layout {
  std::string job = "job";
  uint32_t tp = 1;
  uint32_t pp = 1;
  uint32_t dp = 1;
  uint32_t ranks_per_node = 8;
  uint64_t epoch = 1;

  uint32_t world() const { return tp * pp * dp; }
  uint32_t nodes() const { return (world() + ranks_per_node - 1) / ranks_per_node; }
  uint32_t tp_index(uint32_t r) const { return r % tp; }
  uint32_t dp_index(uint32_t r) const { return (r / tp) % dp; }
  uint32_t pp_index(uint32_t r) const { return r / (tp * dp); }
  uint32_t Rank(uint32_t pp_i, uint32_t dp_i, uint32_t tp_i) const {
    return (pp_i * dp + dp_i) * tp + tp_i;
  }
};

inline constexpr uint64_t kWorldComm = 1;
inline constexpr uint64_t kCommBase = uint64_t{1} << 32;

// Communicator ids of rank `r` (0 when the layout has no such group).
uint64_t TpComm(const Layout& l, uint32_t r);
uint64_t DpComm(const Layout& l, uint32_t r);
uint64_t PpComm(const Layout& l, uint32_t r);
// Members of a communicator of `l`, in communicator-rank order; empty for an unknown id.
std::vector<uint32_t> CommMembers(const Layout& l, uint64_t comm_id);

std::string NodeName(const Layout& l, uint32_t node);
std::vector<uint32_t> RanksOfNode(const Layout& l, uint32_t node);
// The registration the agent of `node` sends: its ranks and the comms they are members of.
falcon::v1::JobRegistration NodeRegistration(const Layout& l, uint32_t node);

}  // namespace falcon::fleet

#endif  // FALCON_FLEET_LAYOUT_H_
