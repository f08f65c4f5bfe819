#include "collective/nccl/nccl_communicator.h"

#include <cuda_runtime_api.h>
#include <glog/logging.h>
#include <nccl.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "collective/comm_id.h"
#include "collective/communicator_base.h"
#include "collective/device_memory.h"
#include "collective/store.h"

namespace falcon::collective::nccl {
namespace {

ncclDataType_t ToNccl(DataType t) {
  switch (t) {
    case DataType::kUint8:
      return ncclUint8;
    case DataType::kInt32:
      return ncclInt32;
    case DataType::kInt64:
      return ncclInt64;
    case DataType::kFloat32:
      return ncclFloat32;
    case DataType::kFloat64:
      return ncclFloat64;
  }
  return ncclFloat32;
}

ncclRedOp_t ToNccl(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return ncclSum;
    case ReduceOp::kProd:
      return ncclProd;
    case ReduceOp::kMin:
      return ncclMin;
    case ReduceOp::kMax:
      return ncclMax;
  }
  return ncclSum;
}

ncclConfig_t NonBlockingConfig() {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  return config;
}

// Waits until `comm` leaves ncclInProgress (init, split). Aborts it at `deadline`.
absl::Status AwaitComm(ncclComm_t comm, absl::Time deadline, absl::string_view what) {
  while (true) {
    ncclResult_t state = ncclSuccess;
    ncclResult_t r = ncclCommGetAsyncError(comm, &state);
    if (r != ncclSuccess) state = r;
    if (state == ncclSuccess) return absl::OkStatus();
    if (state != ncclInProgress) {
      const std::string detail =
          absl::StrCat(what, ": ", ncclGetErrorString(state), ": ", ncclGetLastError(comm));
      ncclCommAbort(comm);
      return absl::UnavailableError(detail);
    }
    if (absl::Now() > deadline) {
      ncclCommAbort(comm);
      return absl::DeadlineExceededError(
          absl::StrCat(what, ": no progress before the timeout (a member did not join)"));
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

struct NcclShared {
  std::shared_ptr<RendezvousStore> store;
  absl::Duration timeout;
  int device = 0;
};

class NcclCommunicator final : public CommunicatorBase {
 public:
  static absl::StatusOr<std::unique_ptr<NcclCommunicator>> Wrap(
      ncclComm_t comm, std::shared_ptr<NcclShared> shared, std::shared_ptr<CommRuntime> runtime,
      CommInfo info) {
    std::unique_ptr<NcclCommunicator> c(
        new NcclCommunicator(comm, std::move(shared), std::move(runtime), std::move(info)));
    if (absl::Status s = c->InitResources(); !s.ok()) return s;
    int nccl_rank = -1;
    ncclCommUserRank(comm, &nccl_rank);
    if (nccl_rank != c->rank()) {
      return absl::InternalError(absl::StrCat(c->Where(), ": NCCL placed this member at rank ",
                                              nccl_rank, ", expected ", c->rank()));
    }
    return c;
  }

  ~NcclCommunicator() override {
    cudaSetDevice(shared_->device);
    if (comm_ != nullptr) {
      if (health().ok()) {
        ncclCommFinalize(comm_);
        // A finalize that fails or does not finish in time leaves peers' operations pending:
        // abort then (destroy would wait on them).
        if (absl::Status s = AwaitComm(comm_, absl::Now() + shared_->timeout, "finalize"); s.ok()) {
          ncclCommDestroy(comm_);
        } else {
          LOG(WARNING) << "NCCL communicator finalize failed, aborting it where=" << Where()
                       << " error=\"" << s.message() << "\"";
          ncclCommAbort(comm_);
        }
      } else {
        ncclCommAbort(comm_);
      }
    }
    if (start_ != nullptr) cudaEventDestroy(start_);
    if (stop_ != nullptr) cudaEventDestroy(stop_);
    if (token_ != nullptr) cudaFree(token_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

 protected:
  absl::Status DoAllReduce(const Buffer& send, const Buffer& recv, ReduceOp op) override {
    ShapeRing(2 * (size() - 1), send.bytes() / static_cast<size_t>(size()));
    return Launch(-1, [&] {
      return ncclAllReduce(send.data, recv.data, send.count, ToNccl(send.dtype), ToNccl(op), comm_,
                           stream_);
    });
  }
  absl::Status DoAllGather(const Buffer& send, const Buffer& recv) override {
    ShapeRing(size() - 1, send.bytes());
    return Launch(-1, [&] {
      return ncclAllGather(send.data, recv.data, send.count, ToNccl(send.dtype), comm_, stream_);
    });
  }
  absl::Status DoReduceScatter(const Buffer& send, const Buffer& recv, ReduceOp op) override {
    ShapeRing(size() - 1, recv.bytes());
    return Launch(-1, [&] {
      return ncclReduceScatter(send.data, recv.data, recv.count, ToNccl(recv.dtype), ToNccl(op),
                               comm_, stream_);
    });
  }
  absl::Status DoBroadcast(const Buffer& buf, int root) override {
    if (rank() != (root + size() - 1) % size()) ShapeRing(1, buf.bytes());
    return Launch(-1, [&] {
      return ncclBroadcast(buf.data, buf.data, buf.count, ToNccl(buf.dtype), root, comm_, stream_);
    });
  }
  absl::Status DoSend(const Buffer& buf, int peer) override {
    Shape(peer, buf.bytes(), 1);
    return Launch(peer, [&] {
      return ncclSend(buf.data, buf.count, ToNccl(buf.dtype), peer, comm_, stream_);
    });
  }
  absl::Status DoRecv(const Buffer& buf, int peer) override {
    return Launch(peer, [&] {
      return ncclRecv(buf.data, buf.count, ToNccl(buf.dtype), peer, comm_, stream_);
    });
  }
  absl::Status DoBarrier() override {
    ShapeRing(2 * (size() - 1), 0);
    return Launch(
        -1, [&] { return ncclAllReduce(token_, token_, 1, ncclInt32, ncclSum, comm_, stream_); });
  }

  absl::StatusOr<std::vector<std::pair<int, int>>> DoExchangeColorKey(int color, int key) override {
    const uint64_t round = ++exchanges_;
    auto key_of = [&](int r) { return absl::StrFormat("split.%016x.%d.%d", id(), round, r); };
    if (auto s = shared_->store->Set(key_of(rank()), absl::StrCat(color, ",", key)); !s.ok()) {
      return s;
    }
    std::vector<std::pair<int, int>> out;
    for (int r = 0; r < size(); ++r) {
      auto v = shared_->store->Get(key_of(r), shared_->timeout);
      if (!v.ok()) return PeerError(absl::StatusCode::kDeadlineExceeded, r, v.status().message());
      int c = 0, k = 0;
      if (std::sscanf(v->c_str(), "%d,%d", &c, &k) != 2) {
        return PeerError(absl::StatusCode::kInternal, r, "malformed split record");
      }
      out.emplace_back(c, k);
    }
    return out;
  }

  absl::StatusOr<std::unique_ptr<CommunicatorBase>> DoSplit(int color, int key,
                                                            const std::optional<SplitGroup>& group,
                                                            CommInfo new_info) override {
    cudaSetDevice(shared_->device);
    ncclConfig_t config = NonBlockingConfig();
    ncclComm_t child = nullptr;
    ncclResult_t r =
        ncclCommSplit(comm_, group.has_value() ? color : NCCL_SPLIT_NOCOLOR, key, &child, &config);
    if (r != ncclSuccess && r != ncclInProgress) {
      return PeerError(
          absl::StatusCode::kInternal, -1,
          absl::StrCat("ncclCommSplit: ", ncclGetErrorString(r), ": ", ncclGetLastError(comm_)));
    }
    const absl::Time deadline = absl::Now() + shared_->timeout;
    if (auto s = AwaitComm(comm_, deadline, "ncclCommSplit (parent)"); !s.ok()) {
      comm_ = nullptr;  // Aborted.
      return PeerError(s.code(), -1, s.message());
    }
    if (child == nullptr) return std::unique_ptr<CommunicatorBase>();
    if (auto s = AwaitComm(child, deadline, "ncclCommSplit"); !s.ok()) {
      return PeerError(s.code(), -1, s.message());
    }
    auto made = Wrap(child, shared_, shared_runtime(), std::move(new_info));
    if (!made.ok()) return made.status();
    return std::unique_ptr<CommunicatorBase>(std::move(*made));
  }

 private:
  NcclCommunicator(ncclComm_t comm, std::shared_ptr<NcclShared> shared,
                   std::shared_ptr<CommRuntime> runtime, CommInfo info)
      : CommunicatorBase(std::move(info), MemoryKind::kDevice, std::move(runtime)),
        comm_(comm),
        shared_(std::move(shared)) {}

  absl::Status InitResources() {
    cudaSetDevice(shared_->device);
    cudaError_t e = cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking);
    if (e == cudaSuccess) e = cudaEventCreate(&start_);
    if (e == cudaSuccess) e = cudaEventCreate(&stop_);
    if (e == cudaSuccess) e = cudaMalloc(&token_, sizeof(int32_t));
    if (e == cudaSuccess) e = cudaMemset(token_, 0, sizeof(int32_t));
    if (e != cudaSuccess) {
      return PeerError(absl::StatusCode::kInternal, -1,
                       absl::StrCat("CUDA setup: ", cudaGetErrorString(e)));
    }
    return absl::OkStatus();
  }

  // Host-side emulation of this rank's slow outgoing link(s); see the header.
  void Shape(int peer, size_t bytes_per_step, int steps) const {
    const fault::LinkShaper* shaper = runtime().link_shaper();
    if (shaper == nullptr || steps <= 0) return;
    const int me = global_rank();
    const int to = info().member_ranks[peer];
    shaper->ApplySteps(me, to, bytes_per_step, steps, runtime().iteration());
  }
  void ShapeRing(int steps, size_t bytes_per_step) const {
    if (size() > 1) Shape((rank() + 1) % size(), bytes_per_step, steps);
  }

  // Enqueues with `enqueue` (device timing around it when profiling) and waits for completion,
  // polling NCCL's async error; aborts and fails at the timeout. `peer` names the p2p peer.
  template <typename Enqueue>
  absl::Status Launch(int peer, Enqueue&& enqueue) {
    cudaSetDevice(shared_->device);
    const bool timed = op_profiling();
    const absl::Time deadline = absl::Now() + shared_->timeout;
    if (timed) cudaEventRecord(start_, stream_);
    const ncclResult_t r = enqueue();
    if (r != ncclSuccess && r != ncclInProgress) {
      return PeerError(
          absl::StatusCode::kInternal, peer,
          absl::StrCat("enqueue: ", ncclGetErrorString(r), ": ", ncclGetLastError(comm_)));
    }
    // Non-blocking communicator: the call may still be enqueueing (ncclInProgress); the stop
    // event goes on the stream only once the op is there.
    bool enqueued = r == ncclSuccess;
    bool stop_recorded = false;
    while (true) {
      ncclResult_t state = ncclSuccess;
      ncclCommGetAsyncError(comm_, &state);
      if (state != ncclSuccess && state != ncclInProgress) {
        const std::string detail =
            absl::StrCat("NCCL error: ", ncclGetErrorString(state), ": ", ncclGetLastError(comm_));
        ncclCommAbort(comm_);
        comm_ = nullptr;
        return PeerError(absl::StatusCode::kUnavailable, peer, detail);
      }
      if (!enqueued && state == ncclSuccess) enqueued = true;
      if (enqueued && timed && !stop_recorded) {
        cudaEventRecord(stop_, stream_);
        stop_recorded = true;
      }
      if (enqueued) {
        const cudaError_t q = cudaStreamQuery(stream_);
        if (q == cudaSuccess && state == ncclSuccess) break;
        if (q != cudaSuccess && q != cudaErrorNotReady) {
          cudaGetLastError();
          return PeerError(absl::StatusCode::kInternal, peer,
                           absl::StrCat("CUDA: ", cudaGetErrorString(q)));
        }
      }
      if (absl::Now() > deadline) {
        ncclCommAbort(comm_);
        comm_ = nullptr;
        return PeerError(absl::StatusCode::kDeadlineExceeded, peer,
                         absl::StrCat("no progress within ", absl::FormatDuration(shared_->timeout),
                                      peer < 0 ? " (some member is hung or gone)" : ""));
      }
      std::this_thread::yield();
    }
    if (timed) {
      float ms = 0;
      if (cudaEventElapsedTime(&ms, start_, stop_) == cudaSuccess) {
        set_op_device_ns(static_cast<int64_t>(static_cast<double>(ms) * 1e6));
      }
    }
    return absl::OkStatus();
  }

  ncclComm_t comm_;
  std::shared_ptr<NcclShared> shared_;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t start_ = nullptr;
  cudaEvent_t stop_ = nullptr;
  int32_t* token_ = nullptr;  // Device int for Barrier().
  uint64_t exchanges_ = 0;
};

}  // namespace

int NcclVersionCode() {
  int v = 0;
  ncclGetVersion(&v);
  return v;
}

absl::StatusOr<std::unique_ptr<Communicator>> CreateNcclWorld(
    const NcclWorldOptions& options, std::shared_ptr<CommRuntime> runtime) {
  if (options.world_size <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("nccl: world_size must be > 0, got ", options.world_size));
  }
  if (options.rank < 0 || options.rank >= options.world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("nccl: rank ", options.rank, " outside [0, ", options.world_size, ")"));
  }
  if (runtime == nullptr || runtime->rank() != options.rank) {
    return absl::InvalidArgumentError("nccl: runtime missing or for another rank");
  }
  auto devices = DeviceCount();
  if (!devices.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("nccl: backend needs a GPU: ", devices.status().message()));
  }
  auto shared = std::make_shared<NcclShared>();
  shared->timeout = options.timeout;
  shared->device = options.device >= 0 ? options.device : options.local_rank % *devices;
  if (shared->device >= *devices) {
    return absl::InvalidArgumentError(
        absl::StrCat("nccl: device ", shared->device, " but only ", *devices, " visible"));
  }
  auto store = RendezvousStore::Open(options.rendezvous_dir);
  if (!store.ok()) return store.status();
  shared->store = *store;
  CommInfo info;
  info.comm_id =
      options.world_comm_id != 0 ? options.world_comm_id : WorldCommId(options.world_size);
  info.kind = CommKind::COMM_KIND_WORLD;
  info.name = "world";
  for (int r = 0; r < options.world_size; ++r) info.member_ranks.push_back(r);
  info.comm_rank = options.rank;
  info.backend = "nccl";

  if (cudaSetDevice(shared->device) != cudaSuccess) {
    cudaGetLastError();
    return absl::FailedPreconditionError(absl::StrCat("nccl: cannot use device ", shared->device));
  }
  const std::string uid_key = absl::StrFormat("nccl.%016x.uid", info.comm_id);
  ncclUniqueId uid;
  if (options.rank == 0) {
    if (ncclResult_t r = ncclGetUniqueId(&uid); r != ncclSuccess) {
      return absl::InternalError(absl::StrCat("nccl: ncclGetUniqueId: ", ncclGetErrorString(r)));
    }
    if (auto s = shared->store->Set(uid_key, absl::string_view(uid.internal, sizeof(uid.internal)));
        !s.ok()) {
      return s;
    }
  } else {
    auto v = shared->store->Get(uid_key, options.timeout);
    if (!v.ok()) return v.status();
    if (v->size() != sizeof(uid.internal)) return absl::InternalError("nccl: bad unique id");
    std::memcpy(uid.internal, v->data(), sizeof(uid.internal));
  }
  ncclConfig_t config = NonBlockingConfig();
  ncclComm_t comm = nullptr;
  ncclResult_t r = ncclCommInitRankConfig(&comm, options.world_size, uid, options.rank, &config);
  if (r != ncclSuccess && r != ncclInProgress) {
    return absl::UnavailableError(
        absl::StrCat("nccl: ncclCommInitRankConfig: ", ncclGetErrorString(r)));
  }
  if (auto s = AwaitComm(comm, absl::Now() + options.timeout, "nccl: world init"); !s.ok()) {
    return s;
  }
  auto made = NcclCommunicator::Wrap(comm, shared, std::move(runtime), std::move(info));
  if (!made.ok()) return made.status();
  (*made)->AnnounceCreated();
  return std::unique_ptr<Communicator>(std::move(*made));
}

}  // namespace falcon::collective::nccl
