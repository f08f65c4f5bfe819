// Builders of shim messages for agent tests: a synthetic rank whose iteration i lasts 10 ms
// ([i * 10 ms, (i + 1) * 10 ms)) and runs one all-reduce on communicator kDpComm.
#ifndef FALCON_AGENT_TESTING_MESSAGES_H_
#define FALCON_AGENT_TESTING_MESSAGES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "proto/falcon/v1/shim.pb.h"

namespace falcon::agent::testing {

inline constexpr uint64_t kDpComm = 0xD0;
inline constexpr int64_t kIterationNs = 10'000'000;

inline v1::ShimMessage HelloMsg(const std::string& job, uint32_t rank, uint32_t world,
                                int32_t pid) {
  v1::ShimMessage m;
  v1::ShimHello* h = m.mutable_hello();
  h->set_job(job);
  h->set_world_size(world);
  h->mutable_rank()->set_rank(rank);
  h->mutable_rank()->set_node("n1");
  h->mutable_rank()->set_local_rank(rank);
  h->mutable_rank()->set_pid(pid);
  h->mutable_rank()->set_gpu(-1);
  h->mutable_rank()->set_dp_index(static_cast<int32_t>(rank));
  h->mutable_rank()->set_pp_index(0);
  h->mutable_rank()->set_tp_index(0);
  h->set_dp_size(world);
  h->set_pp_size(1);
  h->set_tp_size(1);
  h->set_version("test");
  return m;
}

inline v1::ShimMessage CommMsg(uint64_t comm_id, const std::vector<uint32_t>& members,
                               v1::CommKind kind = v1::COMM_KIND_DP) {
  v1::ShimMessage m;
  m.mutable_communicator()->set_comm_id(comm_id);
  m.mutable_communicator()->set_kind(kind);
  for (uint32_t r : members) m.mutable_communicator()->add_member_ranks(r);
  return m;
}

inline v1::ShimMessage HintMsg(int64_t iteration) {
  v1::ShimMessage m;
  m.mutable_iteration()->set_iteration(iteration);
  m.mutable_iteration()->set_start_ns(iteration * kIterationNs);
  m.mutable_iteration()->set_end_ns((iteration + 1) * kIterationNs);
  m.mutable_iteration()->set_loss(1.0);
  return m;
}

// Op batch `sequence` with the all-reduce of iteration `iteration` (op seq = iteration + 1):
// [6 ms, 9 ms) into the iteration.
inline v1::ShimMessage IterationOpsMsg(uint64_t sequence, int64_t iteration) {
  v1::ShimMessage m;
  v1::OpBatch* b = m.mutable_op_batch();
  b->set_sequence(sequence);
  v1::OpRecord* r = b->add_records();
  r->set_comm_id(kDpComm);
  r->set_op_kind(v1::OP_KIND_ALL_REDUCE);
  r->set_bytes(1 << 20);
  r->set_peer(-1);
  r->set_host_start_ns(iteration * kIterationNs + 6'000'000);
  r->set_host_end_ns(iteration * kIterationNs + 9'000'000);
  r->set_seq(static_cast<uint64_t>(iteration) + 1);
  r->set_iteration(iteration);
  return m;
}

}  // namespace falcon::agent::testing

#endif  // FALCON_AGENT_TESTING_MESSAGES_H_
