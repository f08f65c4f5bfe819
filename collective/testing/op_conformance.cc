#include "collective/testing/op_conformance.h"

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "collective/buffer.h"
#include "collective/comm_id.h"

namespace falcon::collective::testing {
namespace {

#define FALCON_RETURN_IF_ERROR(expr)          \
  do {                                        \
    if (absl::Status _s = (expr); !_s.ok()) { \
      return _s;                              \
    }                                         \
  } while (false)

// Value of element i contributed by comm rank r; small integers so every op is exact.
int64_t Contribution(ReduceOp op, int r, size_t i) {
  if (op == ReduceOp::kProd) return 1 + static_cast<int64_t>((r + i) % 2);
  return (r + 1) + static_cast<int64_t>(i % 13);
}

int64_t Expected(ReduceOp op, int n, size_t i) {
  int64_t acc = Contribution(op, 0, i);
  for (int r = 1; r < n; ++r) {
    const int64_t v = Contribution(op, r, i);
    switch (op) {
      case ReduceOp::kSum:
        acc += v;
        break;
      case ReduceOp::kProd:
        acc *= v;
        break;
      case ReduceOp::kMin:
        acc = std::min(acc, v);
        break;
      case ReduceOp::kMax:
        acc = std::max(acc, v);
        break;
    }
  }
  return acc;
}

template <typename T>
absl::StatusOr<OwnedBuffer> Make(const Communicator& comm, const std::vector<T>& values) {
  auto b = OwnedBuffer::Allocate(comm.memory_kind(), DataTypeOf<T>(), values.size());
  if (!b.ok()) return b.status();
  FALCON_RETURN_IF_ERROR(b->Upload(values));
  return b;
}

template <typename T>
absl::Status Compare(const std::string& what, int rank, const std::vector<T>& got,
                     const std::vector<T>& want) {
  if (got.size() != want.size()) {
    return absl::InternalError(
        absl::StrCat(what, ": rank ", rank, ": got ", got.size(), " elements, want ", want.size()));
  }
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] != want[i]) {
      return absl::InternalError(absl::StrCat(what, ": rank ", rank, " index ", i, ": got ",
                                              static_cast<double>(got[i]), ", want ",
                                              static_cast<double>(want[i])));
    }
  }
  return absl::OkStatus();
}

template <typename T>
absl::Status CheckAllReduce(Communicator& comm, ReduceOp op, size_t count, bool in_place) {
  const int n = comm.size();
  const std::string what =
      absl::StrCat("all_reduce ", ReduceOpName(op), " ", DataTypeName(DataTypeOf<T>()), " count ",
                   count, in_place ? " in place" : "");
  std::vector<T> in(count), want(count);
  for (size_t i = 0; i < count; ++i) {
    in[i] = static_cast<T>(Contribution(op, comm.rank(), i));
    want[i] = static_cast<T>(Expected(op, n, i));
  }
  absl::StatusOr<OwnedBuffer> send = Make(comm, in);
  if (!send.ok()) return send.status();
  if (in_place) {
    FALCON_RETURN_IF_ERROR(comm.AllReduce(send->view(), send->view(), op));
    auto got = send->Download<T>();
    if (!got.ok()) return got.status();
    return Compare(what, comm.rank(), *got, want);
  }
  absl::StatusOr<OwnedBuffer> recv = Make(comm, std::vector<T>(count, T{0}));
  if (!recv.ok()) return recv.status();
  FALCON_RETURN_IF_ERROR(comm.AllReduce(send->view(), recv->view(), op));
  auto got = recv->Download<T>();
  if (!got.ok()) return got.status();
  FALCON_RETURN_IF_ERROR(Compare(what, comm.rank(), *got, want));
  auto unchanged = send->Download<T>();  // Out-of-place must not touch the input.
  if (!unchanged.ok()) return unchanged.status();
  return Compare(what + " (send buffer)", comm.rank(), *unchanged, in);
}

template <typename T>
absl::Status CheckAllGather(Communicator& comm, size_t per) {
  const int n = comm.size();
  const std::string what =
      absl::StrCat("all_gather ", DataTypeName(DataTypeOf<T>()), " count ", per);
  std::vector<T> in(per), want(per * n);
  for (size_t i = 0; i < per; ++i) in[i] = static_cast<T>(comm.rank() * 1000 + i % 997);
  for (int r = 0; r < n; ++r) {
    for (size_t i = 0; i < per; ++i) want[r * per + i] = static_cast<T>(r * 1000 + i % 997);
  }
  absl::StatusOr<OwnedBuffer> send = Make(comm, in);
  if (!send.ok()) return send.status();
  absl::StatusOr<OwnedBuffer> recv = Make(comm, std::vector<T>(per * n, T{0}));
  if (!recv.ok()) return recv.status();
  FALCON_RETURN_IF_ERROR(comm.AllGather(send->view(), recv->view()));
  auto got = recv->Download<T>();
  if (!got.ok()) return got.status();
  return Compare(what, comm.rank(), *got, want);
}

template <typename T>
absl::Status CheckReduceScatter(Communicator& comm, ReduceOp op, size_t per) {
  const int n = comm.size();
  const std::string what = absl::StrCat("reduce_scatter ", ReduceOpName(op), " ",
                                        DataTypeName(DataTypeOf<T>()), " count ", per);
  std::vector<T> in(per * n), want(per);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<T>(Contribution(op, comm.rank(), i));
  for (size_t i = 0; i < per; ++i) {
    want[i] = static_cast<T>(Expected(op, n, comm.rank() * per + i));
  }
  absl::StatusOr<OwnedBuffer> send = Make(comm, in);
  if (!send.ok()) return send.status();
  absl::StatusOr<OwnedBuffer> recv = Make(comm, std::vector<T>(per, T{0}));
  if (!recv.ok()) return recv.status();
  FALCON_RETURN_IF_ERROR(comm.ReduceScatter(send->view(), recv->view(), op));
  auto got = recv->Download<T>();
  if (!got.ok()) return got.status();
  return Compare(what, comm.rank(), *got, want);
}

absl::Status CheckBroadcast(Communicator& comm, size_t count) {
  for (int root = 0; root < comm.size(); ++root) {
    std::vector<float> mine(count, -1.0f), want(count);
    for (size_t i = 0; i < count; ++i) want[i] = static_cast<float>(root * 7 + i % 101);
    auto buf = Make(comm, comm.rank() == root ? want : mine);
    if (!buf.ok()) return buf.status();
    FALCON_RETURN_IF_ERROR(comm.Broadcast(buf->view(), root));
    auto got = buf->Download<float>();
    if (!got.ok()) return got.status();
    FALCON_RETURN_IF_ERROR(
        Compare(absl::StrCat("broadcast root ", root, " count ", count), comm.rank(), *got, want));
  }
  return absl::OkStatus();
}

// Every ordered pair (src, dst) in a fixed order; members outside the pair skip it.
absl::Status CheckSendRecv(Communicator& comm, size_t count) {
  const int n = comm.size();
  for (int src = 0; src < n; ++src) {
    for (int dst = 0; dst < n; ++dst) {
      if (src == dst || (comm.rank() != src && comm.rank() != dst)) continue;
      std::vector<int32_t> want(count);
      for (size_t i = 0; i < count; ++i)
        want[i] = src * 100000 + dst * 1000 + static_cast<int32_t>(i % 999);
      if (comm.rank() == src) {
        auto buf = Make(comm, want);
        if (!buf.ok()) return buf.status();
        FALCON_RETURN_IF_ERROR(comm.Send(buf->view(), dst));
      } else {
        auto buf = Make(comm, std::vector<int32_t>(count, -1));
        if (!buf.ok()) return buf.status();
        FALCON_RETURN_IF_ERROR(comm.Recv(buf->view(), src));
        auto got = buf->Download<int32_t>();
        if (!got.ok()) return got.status();
        FALCON_RETURN_IF_ERROR(Compare(absl::StrCat("send ", src, "->", dst, " count ", count),
                                       comm.rank(), *got, want));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status CheckSameId(Communicator& comm) {
  absl::StatusOr<OwnedBuffer> send =
      Make(comm, std::vector<int64_t>{static_cast<int64_t>(comm.id())});
  if (!send.ok()) return send.status();
  absl::StatusOr<OwnedBuffer> recv = Make(comm, std::vector<int64_t>(comm.size(), 0));
  if (!recv.ok()) return recv.status();
  FALCON_RETURN_IF_ERROR(comm.AllGather(send->view(), recv->view()));
  auto got = recv->Download<int64_t>();
  if (!got.ok()) return got.status();
  for (int r = 0; r < comm.size(); ++r) {
    if (static_cast<uint64_t>((*got)[r]) != comm.id()) {
      return absl::InternalError(absl::StrCat("comm id: rank ", r, " has ", (*got)[r], ", rank ",
                                              comm.rank(), " has ", comm.id()));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckAllOps(Communicator& comm, bool quick) {
  const int n = comm.size();
  const size_t uneven = static_cast<size_t>(3 * n + 1);  // Not a multiple of n (n > 1).
  const std::vector<size_t> counts =
      quick ? std::vector<size_t>{1, uneven} : std::vector<size_t>{1, 7, uneven, 65539};
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin, ReduceOp::kMax}) {
    for (size_t ci = 0; ci < counts.size(); ++ci) {
      const size_t count = counts[ci];
      const bool in_place = ci % 2 == 1;
      if (count > 10000 && op != ReduceOp::kSum) continue;
      FALCON_RETURN_IF_ERROR(CheckAllReduce<float>(comm, op, count, in_place));
      if (quick || count > 10000) continue;
      FALCON_RETURN_IF_ERROR(CheckAllReduce<double>(comm, op, count, !in_place));
      FALCON_RETURN_IF_ERROR(CheckAllReduce<int32_t>(comm, op, count, in_place));
      FALCON_RETURN_IF_ERROR(CheckAllReduce<int64_t>(comm, op, count, !in_place));
      FALCON_RETURN_IF_ERROR(CheckAllReduce<uint8_t>(comm, op, count, in_place));
    }
  }
  for (size_t per : quick ? std::vector<size_t>{3} : std::vector<size_t>{1, 5, 1003}) {
    FALCON_RETURN_IF_ERROR(CheckAllGather<float>(comm, per));
    if (!quick) FALCON_RETURN_IF_ERROR(CheckAllGather<int64_t>(comm, per));
  }
  for (size_t per : quick ? std::vector<size_t>{3} : std::vector<size_t>{1, 3, 517}) {
    FALCON_RETURN_IF_ERROR(CheckReduceScatter<float>(comm, ReduceOp::kSum, per));
    if (!quick) FALCON_RETURN_IF_ERROR(CheckReduceScatter<int32_t>(comm, ReduceOp::kMax, per));
  }
  FALCON_RETURN_IF_ERROR(CheckBroadcast(comm, 1));
  if (!quick) FALCON_RETURN_IF_ERROR(CheckBroadcast(comm, 4099));
  FALCON_RETURN_IF_ERROR(CheckSendRecv(comm, quick ? 5 : 2049));
  for (int i = 0; i < 3; ++i) FALCON_RETURN_IF_ERROR(comm.Barrier());
  FALCON_RETURN_IF_ERROR(CheckSameId(comm));
  return comm.health();
}

absl::Status CheckSplits(Communicator& world) {
  const int n = world.size();
  const int me = world.rank();
  if (auto bad = world.Split(-2, 0);
      bad.ok() || bad.status().code() != absl::StatusCode::kInvalidArgument) {
    return absl::InternalError("split with color -2 was not rejected with kInvalidArgument");
  }
  // 1. Parity groups, keys reversed: members in descending world rank.
  const int color = me % 2;
  auto parity =
      world.Split(color, -me, CommLabel{CommKind::COMM_KIND_DP, absl::StrCat("parity", color)});
  if (!parity.ok()) return parity.status();
  if (*parity == nullptr) return absl::InternalError("parity split returned no communicator");
  Communicator& p = **parity;
  std::vector<int32_t> want_members;
  for (int r = n - 1; r >= 0; --r) {
    if (r % 2 == color) want_members.push_back(world.info().member_ranks[r]);
  }
  if (p.info().member_ranks != want_members) {
    return absl::InternalError(absl::StrCat("parity split: members [",
                                            absl::StrJoin(p.info().member_ranks, ","), "], want [",
                                            absl::StrJoin(want_members, ","), "]"));
  }
  if (p.global_rank() != world.global_rank() || p.info().kind != CommKind::COMM_KIND_DP ||
      p.info().parent_comm_id != world.id()) {
    return absl::InternalError("parity split: wrong global rank, kind or parent");
  }
  if (p.id() != SplitCommId(world.id(), color, 1)) {
    return absl::InternalError("parity split: id is not SplitCommId(world, color, 1)");
  }
  FALCON_RETURN_IF_ERROR(CheckAllOps(p, /*quick=*/true));
  // Ids differ across colors: gather every member's sub id over the world.
  {
    absl::StatusOr<OwnedBuffer> send =
        Make(world, std::vector<int64_t>{static_cast<int64_t>(p.id())});
    if (!send.ok()) return send.status();
    absl::StatusOr<OwnedBuffer> recv = Make(world, std::vector<int64_t>(n, 0));
    if (!recv.ok()) return recv.status();
    FALCON_RETURN_IF_ERROR(world.AllGather(send->view(), recv->view()));
    auto ids = recv->Download<int64_t>();
    if (!ids.ok()) return ids.status();
    for (int r = 0; r < n; ++r) {
      const bool same_color = r % 2 == color;
      if (same_color != ((*ids)[r] == static_cast<int64_t>(p.id()))) {
        return absl::InternalError(
            absl::StrCat("parity split: rank ", r, " id ", (*ids)[r], " vs mine ", p.id()));
      }
    }
  }
  // 2. Nested split of the parity group: halves by position.
  auto nested = p.Split(p.rank() % 2, p.rank());
  if (!nested.ok()) return nested.status();
  if (*nested == nullptr || (*nested)->id() != SplitCommId(p.id(), p.rank() % 2, 1)) {
    return absl::InternalError("nested split: missing communicator or wrong id");
  }
  FALCON_RETURN_IF_ERROR(CheckSameId(**nested));
  FALCON_RETURN_IF_ERROR((*nested)->Barrier());
  // 3. Lower half joins, upper half passes kNoColor.
  const bool lower = me < (n + 1) / 2;
  auto half = world.Split(lower ? 0 : Communicator::kNoColor, me);
  if (!half.ok()) return half.status();
  if (lower != (*half != nullptr)) {
    return absl::InternalError(absl::StrCat("half split: rank ", me, " lower=", lower,
                                            " got communicator=", *half != nullptr));
  }
  if (*half != nullptr) {
    if ((*half)->size() != (n + 1) / 2 || (*half)->rank() != me ||
        (*half)->id() != SplitCommId(world.id(), 0, 2)) {
      return absl::InternalError("half split: wrong size, rank or id");
    }
    FALCON_RETURN_IF_ERROR(CheckAllOps(**half, /*quick=*/true));
  }
  // 4. The same split again gets a new id (split sequence 3).
  auto again = world.Split(color, -me);
  if (!again.ok()) return again.status();
  if ((*again)->id() == p.id() || (*again)->id() != SplitCommId(world.id(), color, 3)) {
    return absl::InternalError("repeated split: id not fresh");
  }
  FALCON_RETURN_IF_ERROR((*again)->Barrier());
  // Parent still fine after all that.
  return world.Barrier();
}

}  // namespace falcon::collective::testing
