// Collectives on host memory built only from Transport send/recv, so every byte crosses one
// explicit link per step (a slow link stretches exactly the steps that use it):
//   all-reduce      ring reduce-scatter + ring all-gather, 2(N-1) steps, chunks balanced so any
//                   count works (chunks may be empty);
//   all-gather      ring, N-1 steps;
//   reduce-scatter  ring, N-1 steps;
//   broadcast       binomial tree from the root, ceil(log2 N) rounds;
//   barrier         dissemination, ceil(log2 N) rounds of 1-byte messages.
// Every member calls the same function with the same sizes. `scratch` is a caller-owned buffer
// grown as needed and reused across calls. Errors are the transport's. Not thread-safe.
#ifndef FALCON_COLLECTIVE_RING_RING_COLLECTIVES_H_
#define FALCON_COLLECTIVE_RING_RING_COLLECTIVES_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "collective/ring/transport.h"
#include "collective/types.h"

namespace falcon::collective::ring {

// recv = op over members of send (count elements). send == recv allowed.
absl::Status RingAllReduce(Transport& t, const void* send, void* recv, size_t count, DataType dtype,
                           ReduceOp op, std::vector<uint8_t>* scratch);
// recv (size * bytes_per_rank) = concatenation of every member's send, in rank order. send may
// alias recv's own block.
absl::Status RingAllGather(Transport& t, const void* send, void* recv, size_t bytes_per_rank);
// recv (recv_count elements) = block rank() of the reduction of send (size * recv_count).
absl::Status RingReduceScatter(Transport& t, const void* send, void* recv, size_t recv_count,
                               DataType dtype, ReduceOp op, std::vector<uint8_t>* scratch);
// Copies `bytes` at buf of `root` into buf of every member.
absl::Status TreeBroadcast(Transport& t, void* buf, size_t bytes, int root);
absl::Status DisseminationBarrier(Transport& t);

// Chunk i of `count` elements split into n balanced chunks: [ChunkBegin(i), ChunkBegin(i + 1)).
inline size_t ChunkBegin(size_t count, int n, int i) {
  const size_t base = count / static_cast<size_t>(n);
  const size_t extra = count % static_cast<size_t>(n);
  const size_t ii = static_cast<size_t>(i);
  return ii * base + (ii < extra ? ii : extra);
}

}  // namespace falcon::collective::ring

#endif  // FALCON_COLLECTIVE_RING_RING_COLLECTIVES_H_
