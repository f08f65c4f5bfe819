#include "collective/gloo/gloo_communicator.h"

#include <gloo/common/error.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>

#include <chrono>
#include <exception>
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "collective/comm_id.h"
#include "collective/communicator_base.h"
#include "collective/gloo/gloo_transport.h"
#include "collective/ring/ring_collectives.h"
#include "collective/store.h"

namespace falcon::collective::gloo {
namespace {

constexpr uint64_t kCollectiveSlot = 1;  // Collectives and split exchanges.
constexpr uint64_t kP2pSlot = 2;         // User Send/Recv.

// Gloo's Store interface over a RendezvousStore, under a per-communicator prefix, with our
// timeout (Gloo's own default is 30 s and some of its calls ignore the context timeout).
class GlooStoreAdapter : public ::gloo::rendezvous::Store {
 public:
  GlooStoreAdapter(std::shared_ptr<RendezvousStore> store, std::string prefix,
                   absl::Duration timeout)
      : store_(std::move(store)), prefix_(std::move(prefix)), timeout_(timeout) {}

  void set(const std::string& key, const std::vector<char>& data) override {
    absl::Status s = store_->Set(Key(key), absl::string_view(data.data(), data.size()));
    if (!s.ok()) throw ::gloo::IoException(std::string(s.message()));
  }
  std::vector<char> get(const std::string& key) override {
    auto v = store_->Get(Key(key), timeout_);
    if (!v.ok()) throw ::gloo::IoException(std::string(v.status().message()));
    return std::vector<char>(v->begin(), v->end());
  }
  void wait(const std::vector<std::string>& keys) override { WaitFor(keys, timeout_); }
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override {
    WaitFor(keys, std::min(timeout_, absl::FromChrono(timeout)));
  }

 private:
  std::string Key(const std::string& key) const { return absl::StrCat(prefix_, "/", key); }
  void WaitFor(const std::vector<std::string>& keys, absl::Duration timeout) {
    std::vector<std::string> full;
    for (const std::string& k : keys) full.push_back(Key(k));
    absl::Status s = store_->Wait(full, timeout);
    if (!s.ok()) throw ::gloo::IoException(std::string(s.message()));
  }

  std::shared_ptr<RendezvousStore> store_;
  std::string prefix_;
  absl::Duration timeout_;
};

// What every communicator of a process shares: the TCP device and the store.
struct GlooShared {
  std::shared_ptr<::gloo::transport::Device> device;
  std::shared_ptr<RendezvousStore> store;
  absl::Duration timeout;
};

class GlooCommunicator final : public CommunicatorBase {
 public:
  static absl::StatusOr<std::unique_ptr<GlooCommunicator>> Connect(
      std::shared_ptr<GlooShared> shared, std::shared_ptr<CommRuntime> runtime, CommInfo info) {
    std::unique_ptr<GlooCommunicator> comm(
        new GlooCommunicator(std::move(shared), std::move(runtime), std::move(info)));
    if (absl::Status s = comm->ConnectMesh(); !s.ok()) return s;
    return comm;
  }

 protected:
  absl::Status DoAllReduce(const Buffer& send, const Buffer& recv, ReduceOp op) override {
    return RingAllReduce(*coll_, send.data, recv.data, send.count, send.dtype, op, &scratch_);
  }
  absl::Status DoAllGather(const Buffer& send, const Buffer& recv) override {
    return RingAllGather(*coll_, send.data, recv.data, send.bytes());
  }
  absl::Status DoReduceScatter(const Buffer& send, const Buffer& recv, ReduceOp op) override {
    return RingReduceScatter(*coll_, send.data, recv.data, recv.count, recv.dtype, op, &scratch_);
  }
  absl::Status DoBroadcast(const Buffer& buf, int root) override {
    return TreeBroadcast(*coll_, buf.data, buf.bytes(), root);
  }
  absl::Status DoSend(const Buffer& buf, int peer) override {
    return p2p_->Send(peer, buf.data, buf.bytes());
  }
  absl::Status DoRecv(const Buffer& buf, int peer) override {
    return p2p_->Recv(peer, buf.data, buf.bytes());
  }
  absl::Status DoBarrier() override { return DisseminationBarrier(*coll_); }

  absl::StatusOr<std::vector<std::pair<int, int>>> DoExchangeColorKey(int color, int key) override {
    std::vector<int32_t> all(2 * static_cast<size_t>(size()));
    const int32_t mine[2] = {color, key};
    if (auto s = RingAllGather(*coll_, mine, all.data(), sizeof(mine)); !s.ok()) return s;
    std::vector<std::pair<int, int>> out;
    for (int i = 0; i < size(); ++i) out.emplace_back(all[2 * i], all[2 * i + 1]);
    return out;
  }

  absl::StatusOr<std::unique_ptr<CommunicatorBase>> DoSplit(int /*color*/, int /*key*/,
                                                            const std::optional<SplitGroup>& group,
                                                            CommInfo new_info) override {
    if (!group.has_value()) return std::unique_ptr<CommunicatorBase>();
    auto made = Connect(shared_, shared_runtime(), std::move(new_info));
    if (!made.ok()) return made.status();
    return std::unique_ptr<CommunicatorBase>(std::move(*made));
  }

 private:
  GlooCommunicator(std::shared_ptr<GlooShared> shared, std::shared_ptr<CommRuntime> runtime,
                   CommInfo info)
      : CommunicatorBase(std::move(info), MemoryKind::kHost, std::move(runtime)),
        shared_(std::move(shared)) {}

  absl::Status ConnectMesh() {
    const auto timeout = std::chrono::milliseconds(absl::ToInt64Milliseconds(shared_->timeout));
    auto context = std::make_shared<::gloo::rendezvous::Context>(rank(), size());
    context->setTimeout(timeout);
    if (size() > 1) {
      GlooStoreAdapter store(shared_->store, absl::StrFormat("gloo.%016x", id()), shared_->timeout);
      try {
        context->connectFullMesh(store, shared_->device);
      } catch (const std::exception& e) {
        return PeerError(absl::StrContains(e.what(), "not set within")
                             ? absl::StatusCode::kDeadlineExceeded
                             : absl::StatusCode::kUnavailable,
                         -1, absl::StrCat("connecting ", size(), " members failed: ", e.what()));
      }
    }
    auto error = [this](absl::StatusCode code, int peer, absl::string_view detail) {
      return PeerError(code, peer, detail);
    };
    coll_ = std::make_unique<GlooTransport>(context, info().member_ranks, &runtime(),
                                            kCollectiveSlot, timeout, error);
    p2p_ = std::make_unique<GlooTransport>(context, info().member_ranks, &runtime(), kP2pSlot,
                                           timeout, error);
    context_ = std::move(context);
    return absl::OkStatus();
  }

  std::shared_ptr<GlooShared> shared_;
  std::shared_ptr<::gloo::Context> context_;
  std::unique_ptr<GlooTransport> coll_;
  std::unique_ptr<GlooTransport> p2p_;
  std::vector<uint8_t> scratch_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Communicator>> CreateGlooWorld(
    const GlooWorldOptions& options, std::shared_ptr<CommRuntime> runtime) {
  if (options.world_size <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("gloo: world_size must be > 0, got ", options.world_size));
  }
  if (options.rank < 0 || options.rank >= options.world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("gloo: rank ", options.rank, " outside [0, ", options.world_size, ")"));
  }
  if (runtime == nullptr) return absl::InvalidArgumentError("gloo: runtime is null");
  if (runtime->rank() != options.rank) {
    return absl::InvalidArgumentError(
        absl::StrCat("gloo: runtime rank ", runtime->rank(), " differs from rank ", options.rank));
  }
  if (options.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("gloo: timeout must be > 0");
  }
  auto store = RendezvousStore::Open(options.rendezvous_dir);
  if (!store.ok()) return store.status();
  auto shared = std::make_shared<GlooShared>();
  shared->store = *store;
  shared->timeout = options.timeout;
  try {
    ::gloo::transport::tcp::attr attr;
    attr.hostname = options.hostname;
    shared->device = ::gloo::transport::tcp::CreateDevice(attr);
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("gloo: cannot create a TCP device on '", options.hostname, "': ", e.what()));
  }
  CommInfo info;
  info.comm_id =
      options.world_comm_id != 0 ? options.world_comm_id : WorldCommId(options.world_size);
  info.kind = CommKind::COMM_KIND_WORLD;
  info.name = "world";
  for (int r = 0; r < options.world_size; ++r) info.member_ranks.push_back(r);
  info.comm_rank = options.rank;
  info.backend = "gloo";
  auto comm = GlooCommunicator::Connect(std::move(shared), runtime, std::move(info));
  if (!comm.ok()) return comm.status();
  (*comm)->AnnounceCreated();
  return std::unique_ptr<Communicator>(std::move(*comm));
}

}  // namespace falcon::collective::gloo
