#include "collective/communicator_base.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace falcon::collective {

CommunicatorBase::CommunicatorBase(CommInfo info, MemoryKind memory,
                                   std::shared_ptr<CommRuntime> runtime)
    : info_(std::move(info)), memory_(memory), runtime_(std::move(runtime)) {}

void CommunicatorBase::AnnounceCreated() const {
  if (OpObserver* observer = runtime_->observer()) observer->OnCommCreated(info_);
}

absl::Status CommunicatorBase::health() const {
  if (!broken_.load(std::memory_order_acquire)) return absl::OkStatus();
  absl::MutexLock lock(&health_mu_);
  return health_;
}

void CommunicatorBase::MarkBroken(const absl::Status& cause) {
  absl::MutexLock lock(&health_mu_);
  if (!health_.ok()) return;
  health_ = cause;
  broken_.store(true, std::memory_order_release);
}

std::string CommunicatorBase::Where() const {
  std::string s = absl::StrFormat("comm %#x", info_.comm_id);
  if (!info_.name.empty()) absl::StrAppend(&s, " (", info_.name, ")");
  absl::StrAppend(&s, " rank ", info_.comm_rank, " (global ", global_rank(), ")");
  return s;
}

absl::Status CommunicatorBase::PeerError(absl::StatusCode code, int peer,
                                         absl::string_view detail) const {
  if (peer < 0 || peer >= size()) return absl::Status(code, absl::StrCat(Where(), ": ", detail));
  return absl::Status(code, absl::StrCat(Where(), ": peer rank ", peer, " (global ",
                                         info_.member_ranks[peer], "): ", detail));
}

absl::Status CommunicatorBase::CheckBuffer(absl::string_view what, const Buffer& buf) const {
  if (buf.memory != memory_) {
    return absl::InvalidArgumentError(absl::StrCat(
        Where(), ": buffer '", what, "' is ", MemoryKindName(buf.memory), " memory but this ",
        info_.backend, " communicator needs ", MemoryKindName(memory_), " memory"));
  }
  if (DataTypeSize(buf.dtype) == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(Where(), ": buffer '", what, "' has an invalid dtype"));
  }
  if (buf.count > 0 && buf.data == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(Where(), ": buffer '", what, "' has count ", buf.count, " but no data"));
  }
  return absl::OkStatus();
}

absl::Status CommunicatorBase::CheckRank(absl::string_view what, int r) const {
  if (r < 0 || r >= size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(Where(), ": ", what, " ", r, " outside [0, ", size(), ")"));
  }
  return absl::OkStatus();
}

template <typename Body>
absl::Status CommunicatorBase::Run(OpKind kind, uint64_t bytes, int peer_global, int root_global,
                                   Body&& body) {
  if (broken_.load(std::memory_order_acquire)) {
    absl::Status h = health();
    return absl::FailedPreconditionError(
        absl::StrCat(Where(), ": communicator is broken by an earlier error: ", h.message()));
  }
  runtime_->pause_gate().WaitIfPaused();
  const common::Clock& clock = runtime_->clock();
  op_profiling_ = runtime_->profiling();
  op_device_ns_ = 0;
  const uint64_t seq = runtime_->NextSeq();
  const int64_t start_ns = clock.MonotonicNanos();
  absl::Status status = body();
  const int64_t end_ns = clock.MonotonicNanos();
  if (!status.ok()) MarkBroken(status);
  if (OpObserver* observer = runtime_->observer()) {
    OpEvent e;
    e.comm_id = info_.comm_id;
    e.kind = kind;
    e.rank = runtime_->rank();
    e.peer = peer_global;
    e.root = root_global;
    e.bytes = bytes;
    e.host_start_ns = start_ns;
    e.host_end_ns = end_ns;
    e.device_duration_ns = op_device_ns_;
    e.seq = seq;
    e.iteration = runtime_->iteration();
    e.status_code = static_cast<int32_t>(status.code());
    observer->OnOp(e);
  }
  return status;
}

absl::Status CommunicatorBase::AllReduce(const Buffer& send, const Buffer& recv, ReduceOp op) {
  if (auto s = CheckBuffer("send", send); !s.ok()) return s;
  if (auto s = CheckBuffer("recv", recv); !s.ok()) return s;
  if (send.count != recv.count || send.dtype != recv.dtype) {
    return absl::InvalidArgumentError(absl::StrCat(
        Where(), ": all_reduce needs equal send and recv (send ", send.count, " x ",
        DataTypeName(send.dtype), ", recv ", recv.count, " x ", DataTypeName(recv.dtype), ")"));
  }
  return Run(OpKind::OP_KIND_ALL_REDUCE, send.bytes(), -1, -1,
             [&] { return DoAllReduce(send, recv, op); });
}

absl::Status CommunicatorBase::AllGather(const Buffer& send, const Buffer& recv) {
  if (auto s = CheckBuffer("send", send); !s.ok()) return s;
  if (auto s = CheckBuffer("recv", recv); !s.ok()) return s;
  if (recv.count != send.count * size() || send.dtype != recv.dtype) {
    return absl::InvalidArgumentError(absl::StrCat(
        Where(), ": all_gather needs recv.count == ", size(),
        " * send.count and equal dtypes (send ", send.count, " x ", DataTypeName(send.dtype),
        ", recv ", recv.count, " x ", DataTypeName(recv.dtype), ")"));
  }
  return Run(OpKind::OP_KIND_ALL_GATHER, send.bytes(), -1, -1,
             [&] { return DoAllGather(send, recv); });
}

absl::Status CommunicatorBase::ReduceScatter(const Buffer& send, const Buffer& recv, ReduceOp op) {
  if (auto s = CheckBuffer("send", send); !s.ok()) return s;
  if (auto s = CheckBuffer("recv", recv); !s.ok()) return s;
  if (send.count != recv.count * size() || send.dtype != recv.dtype) {
    return absl::InvalidArgumentError(absl::StrCat(
        Where(), ": reduce_scatter needs send.count == ", size(),
        " * recv.count and equal dtypes (send ", send.count, " x ", DataTypeName(send.dtype),
        ", recv ", recv.count, " x ", DataTypeName(recv.dtype), ")"));
  }
  return Run(OpKind::OP_KIND_REDUCE_SCATTER, send.bytes(), -1, -1,
             [&] { return DoReduceScatter(send, recv, op); });
}

absl::Status CommunicatorBase::Broadcast(const Buffer& buf, int root) {
  if (auto s = CheckBuffer("buf", buf); !s.ok()) return s;
  if (auto s = CheckRank("broadcast root", root); !s.ok()) return s;
  return Run(OpKind::OP_KIND_BROADCAST, buf.bytes(), -1, info_.member_ranks[root],
             [&] { return DoBroadcast(buf, root); });
}

absl::Status CommunicatorBase::Send(const Buffer& buf, int peer) {
  if (auto s = CheckBuffer("buf", buf); !s.ok()) return s;
  if (auto s = CheckRank("send peer", peer); !s.ok()) return s;
  if (peer == rank()) return absl::InvalidArgumentError(absl::StrCat(Where(), ": send to self"));
  return Run(OpKind::OP_KIND_SEND, buf.bytes(), info_.member_ranks[peer], -1,
             [&] { return DoSend(buf, peer); });
}

absl::Status CommunicatorBase::Recv(const Buffer& buf, int peer) {
  if (auto s = CheckBuffer("buf", buf); !s.ok()) return s;
  if (auto s = CheckRank("recv peer", peer); !s.ok()) return s;
  if (peer == rank()) return absl::InvalidArgumentError(absl::StrCat(Where(), ": recv from self"));
  return Run(OpKind::OP_KIND_RECV, buf.bytes(), info_.member_ranks[peer], -1,
             [&] { return DoRecv(buf, peer); });
}

absl::Status CommunicatorBase::Barrier() {
  return Run(OpKind::OP_KIND_BARRIER, 0, -1, -1, [&] { return DoBarrier(); });
}

absl::StatusOr<std::unique_ptr<Communicator>> CommunicatorBase::Split(int color, int key,
                                                                      const CommLabel& label) {
  if (color < kNoColor) {
    return absl::InvalidArgumentError(
        absl::StrCat(Where(), ": split color ", color, " (want >= 0 or kNoColor)"));
  }
  if (broken_.load(std::memory_order_acquire)) {
    return absl::FailedPreconditionError(absl::StrCat(
        Where(), ": communicator is broken by an earlier error: ", health().message()));
  }
  runtime_->pause_gate().WaitIfPaused();
  const uint64_t seq = ++split_count_;
  auto color_keys = DoExchangeColorKey(color, key);
  if (!color_keys.ok()) {
    MarkBroken(color_keys.status());
    return color_keys.status();
  }
  auto group = PlanSplit(*color_keys, rank());
  if (!group.ok()) return group.status();
  CommInfo new_info;
  if (group->has_value()) {
    new_info.comm_id = SplitCommId(info_.comm_id, color, seq);
    new_info.parent_comm_id = info_.comm_id;
    new_info.kind = label.kind;
    new_info.name = label.name;
    for (int parent_rank : (*group)->parent_ranks) {
      new_info.member_ranks.push_back(info_.member_ranks[parent_rank]);
    }
    new_info.comm_rank = (*group)->new_rank;
    new_info.backend = info_.backend;
  }
  auto made = DoSplit(color, key, *group, std::move(new_info));
  if (!made.ok()) {
    MarkBroken(made.status());
    return made.status();
  }
  if (*made != nullptr) (*made)->AnnounceCreated();
  return std::unique_ptr<Communicator>(std::move(*made));
}

}  // namespace falcon::collective
