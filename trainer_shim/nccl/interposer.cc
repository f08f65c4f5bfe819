#include "trainer_shim/nccl/interposer.h"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "trainer_shim/nccl/real_nccl.h"

namespace falcon::trainer_shim::nccl {
namespace {

bool Ok(ncclResult_t r) { return r == ncclSuccess || r == ncclInProgress; }

void Warn(const char* what, const char* detail) {
  std::fprintf(stderr, "[falcon_nccl] %s%s%s\n", what, detail[0] ? ": " : "", detail);
}

}  // namespace

Interposer* Interposer::Get() {
  static Interposer* const instance = []() -> Interposer* {
    try {
      InterposerConfig config = ConfigFromEnv([](const char* name) { return std::getenv(name); });
      if (!config.enabled) return nullptr;
      auto* interposer = new Interposer(std::move(config));  // Lives until exit.
      std::atexit([] {
        if (Interposer* i = Get()) i->Finish();
      });
      return interposer;
    } catch (...) {
      return nullptr;
    }
  }();
  return instance;
}

Interposer::Interposer(InterposerConfig config)
    : config_(std::move(config)), cuda_(Cuda()), owner_pid_(getpid()) {}

Interposer::ThreadState& Interposer::Tls() {
  thread_local ThreadState state;
  return state;
}

void Interposer::KnowRanks(int comm_rank, int comm_size) {
  absl::MutexLock lock(&shim_mu_);
  if (global_rank_.load(std::memory_order_relaxed) >= 0) return;
  int64_t rank = config_.rank;
  int64_t world = config_.world_size;
  if (rank < 0) {  // Unknown from the environment: the first communicator is the world.
    rank = comm_rank;
    world = comm_size;
  }
  world_size_.store(world, std::memory_order_relaxed);
  global_rank_.store(rank, std::memory_order_relaxed);
}

bool Interposer::EnsureShim() {
  if (shim_ready_.load(std::memory_order_acquire)) return true;
  if (shim_given_up_.load(std::memory_order_acquire)) return false;
  absl::MutexLock lock(&shim_mu_);
  if (shim_ready_.load(std::memory_order_acquire)) return true;
  if (shim_failed_) return false;
  const int64_t rank = global_rank_.load(std::memory_order_relaxed);
  const int64_t world = world_size_.load(std::memory_order_relaxed);
  if (rank < 0) return false;  // No communicator yet: nothing to record.
  falcon_shim_options o;
  falcon_shim_options_init(&o);
  o.local_rank = config_.local_rank;
  o.epoch = config_.epoch;
  o.profiling = config_.profiling ? 1 : 0;
  o.shutdown_flush_timeout_ms = config_.exit_flush_ms;
  int device = -1;
  if (cuda_.GetDevice != nullptr) {
    if (cuda_.GetDevice(&device) == cudaSuccess) {
      o.gpu = device;
    } else if (cuda_.GetLastError != nullptr) {
      cuda_.GetLastError();
    }
  }
  const falcon_shim_status status =
      falcon_shim_init(config_.job.c_str(), static_cast<uint32_t>(rank),
                       static_cast<uint32_t>(world), config_.agent_socket.c_str(), &o);
  if (status == FALCON_SHIM_OK) {
    shim_started_ = true;
  } else if (status != FALCON_SHIM_FAILED_PRECONDITION) {  // Not "already running".
    shim_failed_ = true;
    shim_given_up_.store(true, std::memory_order_release);
    Warn("shim init failed; passing NCCL through", falcon_shim_last_error());
    unregistered_.clear();
    return false;
  }
  // The trainer may close a session it started before this process exits: the ops whose device
  // time is still pending go to it first. Looked up, not linked: a shim library older than ABI
  // version 2 lacks it, and NCCL must pass through whatever the library.
  using SetHook = falcon_shim_status (*)(falcon_shim_shutdown_hook_fn, void*);
  if (auto set_hook =
          reinterpret_cast<SetHook>(dlsym(RTLD_DEFAULT, "falcon_shim_set_shutdown_hook"));
      set_hook == nullptr || set_hook(&Interposer::OnShimShutdown, this) != FALCON_SHIM_OK) {
    Warn(
        "no shutdown hook (shim library older than ABI version 2?): ops pending device time "
        "when the trainer closes its session are lost",
        "");
  }
  // The communicators made before the shim ran (the trainer starts its session after NCCL's
  // first communicator, e.g. PyTorch's init_process_group with device_id).
  for (const Registration& r : unregistered_) RegisterWithShim(r);
  unregistered_.clear();
  shim_ready_.store(true, std::memory_order_release);
  return true;
}

void Interposer::RegisterWithShim(const Registration& r) {
  if (falcon_shim_register_comm(r.comm_id, r.kind, r.members.data(),
                                static_cast<uint32_t>(r.members.size()), "") != FALCON_SHIM_OK) {
    Warn("communicator not registered", falcon_shim_last_error());
  }
}

void Interposer::SafePoint() {
  if (EnsureShim() && !session_closed_.load(std::memory_order_acquire)) {
    // Iteration unknown: directives are due at once; a pause holds here.
    (void)falcon_shim_poll_directives(-1, nullptr, nullptr);
  }
}

Interposer::OpToken Interposer::BeginOp(int32_t op_kind, ncclComm_t comm, cudaStream_t stream,
                                        uint64_t bytes, int peer, bool scale_by_comm_size) {
  OpToken t;
  ThreadState& ts = Tls();
  if (ts.depth == 0) SafePoint();
  if (!EnsureShim() || session_closed_.load(std::memory_order_acquire)) return t;
  int comm_rank = 0;
  int comm_size = 0;
  bool ops_by_plugin = false;
  if (!comms_.Lookup(comm, &t.op.comm_id, &comm_rank, &comm_size, &ops_by_plugin)) return t;
  if (ops_by_plugin) return t;  // NCCL's profiler plugin records this comm's ops.
  t.active = true;
  t.grouped = ts.depth > 0;
  t.stream = stream;
  t.op.op_kind = op_kind;
  t.op.bytes = scale_by_comm_size ? bytes * static_cast<uint64_t>(comm_size) : bytes;
  t.op.peer = peer >= 0 ? comms_.GlobalPeer(comm, peer) : -1;
  t.op.iteration = -1;
  if (falcon_shim_profiling_enabled() != 0) {
    cudaEvent_t start = nullptr;
    t.event_slot = AcquireEvents(&start, &t.end_event);
    if (t.event_slot >= 0 && cuda_.EventRecord(start, stream) != cudaSuccess) {
      cuda_.GetLastError();
      ReleaseEvents(t.event_slot);
      t.event_slot = -1;
    }
  }
  t.op.host_start_ns = falcon_shim_now_ns();
  return t;
}

void Interposer::EndOp(OpToken& t, ncclResult_t result) {
  if (!t.active) return;
  t.op.host_end_ns = falcon_shim_now_ns();
  if (!Ok(result)) {  // The op did not happen: nothing to record.
    if (t.event_slot >= 0) ReleaseEvents(t.event_slot);
    return;
  }
  if (t.grouped) {
    Tls().pending.push_back(t);
    return;
  }
  if (t.event_slot >= 0 && cuda_.EventRecord(t.end_event, t.stream) != cudaSuccess) {
    cuda_.GetLastError();
    ReleaseEvents(t.event_slot);
    t.event_slot = -1;
  }
  Record(t.op, t.event_slot);
}

void Interposer::BeforeGroupStart() {
  if (Tls().depth == 0) SafePoint();
}

void Interposer::AfterGroupStart(ncclResult_t result) {
  if (result == ncclSuccess) ++Tls().depth;
}

void Interposer::AfterGroupEnd(ncclResult_t result) {
  ThreadState& ts = Tls();
  if (ts.depth > 0) --ts.depth;
  if (ts.depth > 0) return;
  const int64_t launched_ns = falcon_shim_now_ns();
  std::vector<OpToken> pending = std::move(ts.pending);
  std::vector<NewComm> deferred = std::move(ts.deferred);
  ts.pending.clear();
  ts.deferred.clear();
  for (OpToken& t : pending) {
    if (!Ok(result)) {
      if (t.event_slot >= 0) ReleaseEvents(t.event_slot);
      continue;
    }
    t.op.host_end_ns = launched_ns;
    if (t.event_slot >= 0 && cuda_.EventRecord(t.end_event, t.stream) != cudaSuccess) {
      cuda_.GetLastError();
      ReleaseEvents(t.event_slot);
      t.event_slot = -1;
    }
    Record(t.op, t.event_slot);
  }
  if (deferred.empty()) return;
  if (result == ncclSuccess) {
    ExchangeAndRegister(deferred);
  } else {
    for (const NewComm& c : deferred) Register(c, FallbackMembers(c));
  }
}

void Interposer::Record(const falcon_shim_op& op, int slot) {
  if (slot < 0 && timed_count_.load(std::memory_order_acquire) == 0) {
    (void)falcon_shim_record_op(&op);  // Ring full is counted by the shim.
    return;
  }
  {
    absl::MutexLock lock(&timing_mu_);
    timed_.push_back(TimedOp{op, slot});
    timed_count_.store(timed_.size(), std::memory_order_release);
  }
  DrainTimed(/*block=*/false);
}

void Interposer::DrainTimed(bool block) {
  if (timed_count_.load(std::memory_order_acquire) == 0) return;
  absl::MutexLock lock(&timing_mu_);
  while (!timed_.empty()) {
    TimedOp& front = timed_.front();
    if (front.slot >= 0) {
      const EventPair e = events_[front.slot];
      const cudaError_t q = block ? cuda_.EventSynchronize(e.end) : cuda_.EventQuery(e.end);
      if (q == cudaErrorNotReady) break;
      float ms = 0;
      if (q == cudaSuccess && cuda_.EventElapsedTime(&ms, e.start, e.end) == cudaSuccess) {
        front.op.device_duration_ns = std::max<int64_t>(0, std::llround(ms * 1e6));
      } else {
        cuda_.GetLastError();
      }
      free_events_.push_back(front.slot);
    }
    (void)falcon_shim_record_op(&front.op);
    timed_.pop_front();
  }
  timed_count_.store(timed_.size(), std::memory_order_release);
}

int Interposer::AcquireEvents(cudaEvent_t* start, cudaEvent_t* end) {
  if (!cuda_.timing_ok()) return -1;
  absl::MutexLock lock(&timing_mu_);
  if (events_failed_) return -1;
  int device = -1;
  if (cuda_.GetDevice(&device) != cudaSuccess) {
    cuda_.GetLastError();
    return -1;
  }
  if (events_.empty()) {  // First profiled op: make the pool on this device.
    std::vector<EventPair> made;
    for (uint32_t i = 0; i < config_.event_pool; ++i) {
      EventPair p;
      if (cuda_.EventCreateWithFlags(&p.start, cudaEventDefault) != cudaSuccess ||
          cuda_.EventCreateWithFlags(&p.end, cudaEventDefault) != cudaSuccess) {
        cuda_.GetLastError();
        if (p.start != nullptr) cuda_.EventDestroy(p.start);
        for (const EventPair& q : made) {
          cuda_.EventDestroy(q.start);
          cuda_.EventDestroy(q.end);
        }
        events_failed_ = true;
        Warn("cannot create CUDA events; device timing off", "");
        return -1;
      }
      made.push_back(p);
    }
    events_ = std::move(made);
    events_device_ = device;
    for (int i = static_cast<int>(events_.size()) - 1; i >= 0; --i) free_events_.push_back(i);
  }
  if (device != events_device_ || free_events_.empty()) return -1;
  const int slot = free_events_.back();
  free_events_.pop_back();
  *start = events_[slot].start;
  *end = events_[slot].end;
  return slot;
}

void Interposer::ReleaseEvents(int slot) {
  absl::MutexLock lock(&timing_mu_);
  free_events_.push_back(slot);
}

bool Interposer::BlockingByEnv() {
  const char* v = std::getenv("NCCL_COMM_BLOCKING");
  return v == nullptr || std::strcmp(v, "0") != 0;
}

std::vector<uint32_t> Interposer::FallbackMembers(const NewComm& c) const {
  // Without an exchange only a world-sized comm whose rank matches ours is safe to guess.
  const int64_t world = world_size_.load(std::memory_order_relaxed);
  const int64_t rank = global_rank_.load(std::memory_order_relaxed);
  std::vector<uint32_t> members;
  if (c.comm_size == world && c.comm_rank == rank) {
    for (int64_t r = 0; r < world; ++r) members.push_back(static_cast<uint32_t>(r));
  }
  return members;
}

void Interposer::AfterCommInit(ncclResult_t result, ncclComm_t comm, int nranks,
                               const ncclUniqueId& id, int rank, bool blocking) {
  if (!Ok(result) || comm == nullptr || nranks <= 0) return;
  KnowRanks(rank, nranks);
  NewComm c{comm, CommIdFromUniqueId(id.internal, sizeof(id.internal)), rank, nranks};
  AddComm(c, blocking && BlockingByEnv() && result == ncclSuccess);
}

uint64_t Interposer::BeforeCommSplit(ncclComm_t parent) { return comms_.NextSplitIndex(parent); }

void Interposer::AfterCommSplit(ncclResult_t result, ncclComm_t parent, uint64_t split_index,
                                int color, ncclComm_t newcomm, bool blocking) {
  if (!Ok(result) || newcomm == nullptr) return;
  uint64_t parent_id = 0;
  int parent_rank = 0;
  int parent_size = 0;
  if (!comms_.Lookup(parent, &parent_id, &parent_rank, &parent_size)) return;
  const RealNccl& real = Real();
  int rank = -1;
  int count = -1;
  if (real.CommUserRank == nullptr || real.CommCount == nullptr ||
      real.CommUserRank(newcomm, &rank) != ncclSuccess ||
      real.CommCount(newcomm, &count) != ncclSuccess || rank < 0 || count <= 0) {
    return;
  }
  NewComm c{newcomm, SplitCommId(parent_id, split_index, color), rank, count};
  AddComm(c, blocking && BlockingByEnv() && result == ncclSuccess);
}

void Interposer::AddComm(const NewComm& c, bool ready) {
  comms_.Add(c.comm, CommRegistry::Entry{c.comm_id, c.comm_rank, c.comm_size, {}});
  if (!ready) {
    Register(c, FallbackMembers(c));
  } else if (Tls().depth > 0) {
    Tls().deferred.push_back(c);  // NCCL finishes it at the outermost ncclGroupEnd.
  } else {
    ExchangeAndRegister({c});
  }
}

void Interposer::ExchangeAndRegister(const std::vector<NewComm>& comms) {
  const RealNccl& real = Real();
  if (!config_.exchange_membership || !cuda_.exchange_ok() || real.AllGather == nullptr ||
      real.GroupStart == nullptr || real.GroupEnd == nullptr) {
    for (const NewComm& c : comms) Register(c, FallbackMembers(c));
    return;
  }
  const int32_t me = static_cast<int32_t>(global_rank_.load(std::memory_order_relaxed));
  const uint32_t world = static_cast<uint32_t>(world_size_.load(std::memory_order_relaxed));
  int previous_device = 0;
  if (cuda_.GetDevice(&previous_device) != cudaSuccess) {
    cuda_.GetLastError();
    for (const NewComm& c : comms) Register(c, FallbackMembers(c));
    return;
  }
  struct Buffer {
    int32_t* device_ptr = nullptr;
    int device = 0;
    bool ok = false;
  };
  std::vector<Buffer> buffers(comms.size());
  for (size_t i = 0; i < comms.size(); ++i) {
    Buffer& b = buffers[i];
    b.device = previous_device;
    if (real.CommCuDevice != nullptr) real.CommCuDevice(comms[i].comm, &b.device);
    void* p = nullptr;
    b.ok = cuda_.SetDevice(b.device) == cudaSuccess &&
           cuda_.Malloc(&p, sizeof(int32_t) * (comms[i].comm_size + 1)) == cudaSuccess;
    b.device_ptr = static_cast<int32_t*>(p);
    b.ok =
        b.ok && cuda_.Memcpy(b.device_ptr, &me, sizeof(me), cudaMemcpyHostToDevice) == cudaSuccess;
    if (!b.ok) cuda_.GetLastError();
  }
  // One grouped all-gather of int32 global ranks over every new comm, on the default stream.
  bool gathered = real.GroupStart() == ncclSuccess;
  for (size_t i = 0; gathered && i < comms.size(); ++i) {
    if (!buffers[i].ok) continue;
    buffers[i].ok = real.AllGather(buffers[i].device_ptr, buffers[i].device_ptr + 1, 1, ncclInt32,
                                   comms[i].comm, nullptr) == ncclSuccess;
  }
  if (gathered) gathered = real.GroupEnd() == ncclSuccess;
  for (size_t i = 0; i < comms.size(); ++i) {
    const NewComm& c = comms[i];
    Buffer& b = buffers[i];
    std::vector<int32_t> host(c.comm_size, -1);
    bool ok = gathered && b.ok && cuda_.SetDevice(b.device) == cudaSuccess &&
              cuda_.StreamSynchronize(nullptr) == cudaSuccess &&
              cuda_.Memcpy(host.data(), b.device_ptr + 1, sizeof(int32_t) * c.comm_size,
                           cudaMemcpyDeviceToHost) == cudaSuccess;
    if (b.device_ptr != nullptr) cuda_.Free(b.device_ptr);
    if (!ok) cuda_.GetLastError();
    absl::StatusOr<std::vector<uint32_t>> members =
        ok ? CheckGatheredMembers(host, c.comm_rank, static_cast<uint32_t>(me), world)
           : absl::StatusOr<std::vector<uint32_t>>(absl::UnavailableError("exchange failed"));
    if (!members.ok()) {
      Warn("membership exchange failed", std::string(members.status().message()).c_str());
    }
    Register(c, members.ok() ? *std::move(members) : FallbackMembers(c));
  }
  if (cuda_.SetDevice(previous_device) != cudaSuccess) cuda_.GetLastError();
}

void Interposer::Register(const NewComm& c, const std::vector<uint32_t>& members) {
  if (members.empty()) return;  // Ops are still recorded; the agent sees an unregistered comm.
  comms_.SetMembers(c.comm, members);
  BindProfilerPlugin(c, members);
  const int64_t world = world_size_.load(std::memory_order_relaxed);
  const int32_t kind = static_cast<int64_t>(members.size()) == world ? FALCON_SHIM_COMM_WORLD
                                                                     : FALCON_SHIM_COMM_UNKNOWN;
  Registration r{c.comm_id, kind, members};
  {
    absl::MutexLock lock(&shim_mu_);
    if (!shim_ready_.load(std::memory_order_acquire)) {
      if (!shim_failed_) unregistered_.push_back(std::move(r));  // Registered at its start.
      return;
    }
  }
  RegisterWithShim(r);
}

void Interposer::BindProfilerPlugin(const NewComm& c, const std::vector<uint32_t>& members) {
  const falcon_shim_status status = falcon_shim_nccl_comm_bind(
      static_cast<uint32_t>(c.comm_size), static_cast<uint32_t>(c.comm_rank), c.comm_id,
      members.data(), static_cast<uint32_t>(members.size()));
  if (status == FALCON_SHIM_OK) {
    if (config_.op_timing == OpTiming::kPlugin) comms_.SetOpsByPlugin(c.comm);
  } else if (status != FALCON_SHIM_FAILED_PRECONDITION) {  // FAILED_PRECONDITION: no plugin.
    Warn("profiler plugin not bound to the communicator", falcon_shim_last_error());
  }
}

void Interposer::BeforeCommDestroy(ncclComm_t comm) {
  DrainTimed(/*block=*/true);
  uint64_t id = 0;
  int comm_rank = 0;
  int comm_size = 0;
  if (comms_.Lookup(comm, &id, &comm_rank, &comm_size)) {
    absl::MutexLock lock(&shim_mu_);  // Gone before the shim started: nothing to register.
    unregistered_.erase(std::remove_if(unregistered_.begin(), unregistered_.end(),
                                       [id](const Registration& r) { return r.comm_id == id; }),
                        unregistered_.end());
  }
  comms_.Remove(comm);
}

void Interposer::FlushTimed() {
  DrainTimed(/*block=*/false);
  // Whatever the GPU has not finished goes out with host timing only.
  absl::MutexLock lock(&timing_mu_);
  for (TimedOp& t : timed_) {
    (void)falcon_shim_record_op(&t.op);
    if (t.slot >= 0) free_events_.push_back(t.slot);
  }
  timed_.clear();
  timed_count_.store(0, std::memory_order_release);
}

void Interposer::OnShimShutdown(void* interposer) {
  auto* self = static_cast<Interposer*>(interposer);
  if (getpid() != self->owner_pid_) return;
  self->FlushTimed();
  // The session is over (the trainer's close, or ours at exit): NCCL passes through untimed from
  // now on; a later session in this process is not adopted.
  if (!self->session_closed_.exchange(true, std::memory_order_acq_rel) &&
      !self->finishing_.load(std::memory_order_acquire)) {
    Warn("the training process closed its Falcon session: NCCL ops pass through untimed", "");
  }
}

void Interposer::Finish() {
  if (getpid() != owner_pid_) return;  // A forked child (e.g. a data loader) owns no shim.
  finishing_.store(true, std::memory_order_release);
  FlushTimed();
  absl::MutexLock lock(&shim_mu_);
  if (shim_started_) {
    (void)falcon_shim_shutdown();
    shim_started_ = false;
  }
}

}  // namespace falcon::trainer_shim::nccl
