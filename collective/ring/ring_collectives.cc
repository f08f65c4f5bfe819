#include "collective/ring/ring_collectives.h"

#include <algorithm>
#include <cstring>

#include "collective/ring/host_reduce.h"

namespace falcon::collective::ring {
namespace {

int Mod(int a, int n) { return ((a % n) + n) % n; }

// Ring reduce-scatter in place over `work` (count elements split in balanced chunks): afterwards
// chunk rank() holds the reduction over all members. `tmp` holds the largest chunk.
absl::Status ReduceScatterInPlace(Transport& t, uint8_t* work, size_t count, DataType dtype,
                                  ReduceOp op, uint8_t* tmp) {
  const int n = t.size();
  const int r = t.rank();
  const size_t es = DataTypeSize(dtype);
  const int next = Mod(r + 1, n);
  const int prev = Mod(r - 1, n);
  for (int s = 0; s < n - 1; ++s) {
    const int send_chunk = Mod(r - s - 1, n);
    const int recv_chunk = Mod(r - s - 2, n);
    const size_t send_begin = ChunkBegin(count, n, send_chunk);
    const size_t send_len = ChunkBegin(count, n, send_chunk + 1) - send_begin;
    const size_t recv_begin = ChunkBegin(count, n, recv_chunk);
    const size_t recv_len = ChunkBegin(count, n, recv_chunk + 1) - recv_begin;
    if (auto st = t.SendRecv(next, work + send_begin * es, send_len * es, prev, tmp, recv_len * es);
        !st.ok()) {
      return st;
    }
    ReduceInto(dtype, op, work + recv_begin * es, tmp, recv_len);
  }
  return absl::OkStatus();
}

// Ring all-gather in place over `buf` (count elements in balanced chunks), where chunk rank() is
// already in place.
absl::Status AllGatherInPlace(Transport& t, uint8_t* buf, size_t count, size_t es) {
  const int n = t.size();
  const int r = t.rank();
  const int next = Mod(r + 1, n);
  const int prev = Mod(r - 1, n);
  for (int s = 0; s < n - 1; ++s) {
    const int send_chunk = Mod(r - s, n);
    const int recv_chunk = Mod(r - s - 1, n);
    const size_t send_begin = ChunkBegin(count, n, send_chunk);
    const size_t send_len = ChunkBegin(count, n, send_chunk + 1) - send_begin;
    const size_t recv_begin = ChunkBegin(count, n, recv_chunk);
    const size_t recv_len = ChunkBegin(count, n, recv_chunk + 1) - recv_begin;
    if (auto st = t.SendRecv(next, buf + send_begin * es, send_len * es, prev,
                             buf + recv_begin * es, recv_len * es);
        !st.ok()) {
      return st;
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status RingAllReduce(Transport& t, const void* send, void* recv, size_t count, DataType dtype,
                           ReduceOp op, std::vector<uint8_t>* scratch) {
  const size_t es = DataTypeSize(dtype);
  if (send != recv && count > 0) std::memmove(recv, send, count * es);
  const int n = t.size();
  if (n == 1 || count == 0) return absl::OkStatus();
  const size_t max_chunk = ChunkBegin(count, n, 1);  // Chunk 0 is a largest one.
  if (scratch->size() < max_chunk * es) scratch->resize(max_chunk * es);
  auto* work = static_cast<uint8_t*>(recv);
  if (auto st = ReduceScatterInPlace(t, work, count, dtype, op, scratch->data()); !st.ok()) {
    return st;
  }
  return AllGatherInPlace(t, work, count, es);
}

absl::Status RingAllGather(Transport& t, const void* send, void* recv, size_t bytes_per_rank) {
  const int n = t.size();
  auto* out = static_cast<uint8_t*>(recv);
  uint8_t* mine = out + static_cast<size_t>(t.rank()) * bytes_per_rank;
  if (send != mine && bytes_per_rank > 0) std::memmove(mine, send, bytes_per_rank);
  if (n == 1 || bytes_per_rank == 0) return absl::OkStatus();
  // Chunks of n * bytes_per_rank bytes in n balanced chunks are exactly the per-rank blocks.
  return AllGatherInPlace(t, out, bytes_per_rank * static_cast<size_t>(n), 1);
}

absl::Status RingReduceScatter(Transport& t, const void* send, void* recv, size_t recv_count,
                               DataType dtype, ReduceOp op, std::vector<uint8_t>* scratch) {
  const int n = t.size();
  const size_t es = DataTypeSize(dtype);
  const size_t block = recv_count * es;
  const size_t total = block * static_cast<size_t>(n);
  if (n == 1) {
    if (send != recv && block > 0) std::memmove(recv, send, block);
    return absl::OkStatus();
  }
  if (recv_count == 0) return absl::OkStatus();
  if (scratch->size() < total + block) scratch->resize(total + block);
  uint8_t* work = scratch->data();
  std::memcpy(work, send, total);
  if (auto st = ReduceScatterInPlace(t, work, recv_count * static_cast<size_t>(n), dtype, op,
                                     work + total);
      !st.ok()) {
    return st;
  }
  std::memcpy(recv, work + static_cast<size_t>(t.rank()) * block, block);
  return absl::OkStatus();
}

absl::Status TreeBroadcast(Transport& t, void* buf, size_t bytes, int root) {
  const int n = t.size();
  if (n == 1 || bytes == 0) return absl::OkStatus();
  const int rel = Mod(t.rank() - root, n);
  int mask = 1;
  while (mask < n) {
    if (rel & mask) {
      if (auto st = t.Recv(Mod(rel - mask + root, n), buf, bytes); !st.ok()) return st;
      break;
    }
    mask <<= 1;
  }
  mask >>= 1;
  while (mask > 0) {
    if (rel + mask < n) {
      if (auto st = t.Send(Mod(rel + mask + root, n), buf, bytes); !st.ok()) return st;
    }
    mask >>= 1;
  }
  return absl::OkStatus();
}

absl::Status DisseminationBarrier(Transport& t) {
  const int n = t.size();
  uint8_t out = 1;
  uint8_t in = 0;
  for (int k = 1; k < n; k <<= 1) {
    if (auto st = t.SendRecv(Mod(t.rank() + k, n), &out, 1, Mod(t.rank() - k, n), &in, 1);
        !st.ok()) {
      return st;
    }
  }
  return absl::OkStatus();
}

}  // namespace falcon::collective::ring
