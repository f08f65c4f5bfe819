#include "trainer_shim/nccl_profiler/profiler_core.h"

#include <algorithm>
#include <cstring>
#include <limits>

namespace falcon::trainer_shim::nccl_profiler {

int32_t OpKindOfNcclFunc(const char* func) {
  if (func == nullptr) return 0;
  struct Name {
    const char* name;
    int32_t kind;
  };
  static constexpr Name kNames[] = {
      {"AllReduce", FALCON_SHIM_OP_ALL_REDUCE},
      {"AllGather", FALCON_SHIM_OP_ALL_GATHER},
      {"ReduceScatter", FALCON_SHIM_OP_REDUCE_SCATTER},
      {"Broadcast", FALCON_SHIM_OP_BROADCAST},
      {"Reduce", FALCON_SHIM_OP_REDUCE},
      {"Send", FALCON_SHIM_OP_SEND},
      {"Recv", FALCON_SHIM_OP_RECV},
      {"AllToAll", FALCON_SHIM_OP_ALL_TO_ALL},
      {"AlltoAll", FALCON_SHIM_OP_ALL_TO_ALL},
  };
  for (const Name& n : kNames) {
    if (std::strcmp(func, n.name) == 0) return n.kind;
  }
  return 0;
}

size_t NcclDatatypeSize(const char* datatype) {
  if (datatype == nullptr) return 0;
  struct Type {
    const char* name;
    size_t size;
  };
  static constexpr Type kTypes[] = {
      {"ncclInt8", 1},    {"ncclUint8", 1},    {"ncclInt32", 4},      {"ncclUint32", 4},
      {"ncclInt64", 8},   {"ncclUint64", 8},   {"ncclFloat16", 2},    {"ncclFloat32", 4},
      {"ncclFloat64", 8}, {"ncclBfloat16", 2}, {"ncclFloat8e4m3", 1}, {"ncclFloat8e5m2", 1},
  };
  for (const Type& t : kTypes) {
    if (std::strcmp(datatype, t.name) == 0) return t.size;
  }
  return 0;
}

namespace {

// a x b, or UINT64_MAX when it does not fit (the shim then refuses it as above 2^40).
uint64_t SaturatingMul(uint64_t a, uint64_t b) {
  uint64_t out = 0;
  return __builtin_mul_overflow(a, b, &out) ? std::numeric_limits<uint64_t>::max() : out;
}

uint64_t SaturatingAdd(uint64_t a, uint64_t b) {
  uint64_t out = 0;
  return __builtin_add_overflow(a, b, &out) ? std::numeric_limits<uint64_t>::max() : out;
}

}  // namespace

ProfilerCore::ProfilerCore(Options options, const common::Clock& clock, RecordSink* sink,
                           CoreCounters* counters)
    : options_(options), clock_(clock), sink_(sink), counters_(counters) {
  ignored_.core = this;
  ignored_.kind = Kind::kIgnored;
}

ProfilerCore::~ProfilerCore() {
  absl::MutexLock lock(&mu_);
  for (Event* e : live_) DeleteEvent(e);
  live_.clear();
  for (std::vector<Event*>& pool : free_) {
    for (Event* e : pool) DeleteEvent(e);
    pool.clear();
  }
}

template <typename T>
T* ProfilerCore::NewEvent(Kind kind) {
  if (live_.size() >= options_.max_events) {
    counters_->events_dropped.fetch_add(1, std::memory_order_relaxed);
    return nullptr;
  }
  std::vector<Event*>& pool = free_[static_cast<size_t>(kind)];
  T* e = nullptr;
  if (pool.empty()) {
    e = new T();
    e->core = this;
  } else {
    e = static_cast<T*>(pool.back());
    pool.pop_back();
    *e = T();  // Keeps e->core (Event::operator=).
  }
  e->kind = kind;
  live_.insert(e);
  return e;
}

void ProfilerCore::FreeEvent(Event* e) {
  live_.erase(e);
  free_[static_cast<size_t>(e->kind)].push_back(e);
}

void ProfilerCore::DeleteEvent(Event* e) {
  switch (e->kind) {
    case Kind::kGroup:
      delete static_cast<GroupEvent*>(e);
      break;
    case Kind::kOp:
      delete static_cast<OpEvent*>(e);
      break;
    case Kind::kProxyOp:
      delete static_cast<ProxyOpEvent*>(e);
      break;
    case Kind::kProxyStep:
      delete static_cast<StepEvent*>(e);
      break;
    case Kind::kKernelCh:
      delete static_cast<KernelChEvent*>(e);
      break;
    case Kind::kIgnored:
      break;
  }
}

template <typename T>
T* ProfilerCore::Live(void* handle, Kind kind) {
  auto* e = static_cast<Event*>(handle);
  if (e == nullptr || !live_.contains(e) || e->kind != kind) return nullptr;
  return static_cast<T*>(e);
}

void* ProfilerCore::StartGroup() {
  absl::MutexLock lock(&mu_);
  auto* g = NewEvent<GroupEvent>(Kind::kGroup);
  if (g == nullptr) return nullptr;
  g->seq = next_group_seq_++;
  return g;
}

void* ProfilerCore::StartColl(void* group, const char* func, size_t count, const char* datatype) {
  const int32_t kind = OpKindOfNcclFunc(func);
  const size_t size = NcclDatatypeSize(datatype);
  uint64_t bytes = SaturatingMul(count, size);
  if (kind == FALCON_SHIM_OP_REDUCE_SCATTER) bytes = SaturatingMul(bytes, options_.nranks);
  absl::MutexLock lock(&mu_);
  return StartOp(group, kind, bytes, -1, kind != 0 && size != 0);
}

void* ProfilerCore::StartP2p(void* group, const char* func, size_t count, const char* datatype,
                             int peer) {
  const int32_t kind = OpKindOfNcclFunc(func);
  const size_t size = NcclDatatypeSize(datatype);
  absl::MutexLock lock(&mu_);
  return StartOp(group, kind, SaturatingMul(count, size), peer,
                 (kind == FALCON_SHIM_OP_SEND || kind == FALCON_SHIM_OP_RECV) && size != 0);
}

void* ProfilerCore::StartOp(void* group, int32_t op_kind, uint64_t bytes, int peer, bool known) {
  auto* op = NewEvent<OpEvent>(Kind::kOp);
  if (op == nullptr) return nullptr;
  const GroupEvent* g = Live<GroupEvent>(group, Kind::kGroup);
  op->group_seq = g != nullptr ? g->seq : next_group_seq_++;  // Unknown group: a group of its own.
  op->op_kind = known ? op_kind : 0;
  op->bytes = bytes;
  op->peer = peer;
  op->start_ns = clock_.MonotonicNanos();
  pending_.push_back(op);
  return op;
}

void* ProfilerCore::StartProxyOp(void* parent, pid_t pid, int channel, int peer, bool is_send) {
  if (pid != options_.pid) {  // PXN: parent is another process's address.
    counters_->pxn_proxy_ops.fetch_add(1, std::memory_order_relaxed);
    return nullptr;
  }
  absl::MutexLock lock(&mu_);
  OpEvent* op = Live<OpEvent>(parent, Kind::kOp);
  if (op == nullptr) {
    counters_->orphan_events.fetch_add(1, std::memory_order_relaxed);
    return nullptr;
  }
  auto* p = NewEvent<ProxyOpEvent>(Kind::kProxyOp);
  if (p == nullptr) return nullptr;
  p->op = op;
  p->channel = channel;
  p->peer = peer;
  p->send = is_send;
  ChildStarted(op);
  return p;
}

void* ProfilerCore::StartProxyStep(void* parent) {
  absl::MutexLock lock(&mu_);
  ProxyOpEvent* p = Live<ProxyOpEvent>(parent, Kind::kProxyOp);
  if (p == nullptr) {
    counters_->orphan_events.fetch_add(1, std::memory_order_relaxed);
    return nullptr;
  }
  auto* s = NewEvent<StepEvent>(Kind::kProxyStep);
  if (s == nullptr) return nullptr;
  s->proxy_op = p;
  ++p->open_steps;
  return s;
}

void* ProfilerCore::StartKernelCh(void* parent, int /*channel*/, uint64_t start_timer_ns) {
  absl::MutexLock lock(&mu_);
  OpEvent* op = Live<OpEvent>(parent, Kind::kOp);
  if (op == nullptr) {
    counters_->orphan_events.fetch_add(1, std::memory_order_relaxed);
    return nullptr;
  }
  auto* k = NewEvent<KernelChEvent>(Kind::kKernelCh);
  if (k == nullptr) return nullptr;
  k->op = op;
  k->start_timer = start_timer_ns;
  ChildStarted(op);
  return k;
}

void ProfilerCore::ChildStarted(OpEvent* op) {
  ++op->open_children;
  op->had_children = true;
  if (op->group_seq > newest_child_group_) {
    newest_child_group_ = op->group_seq;
    EmitReady();
  }
}

void ProfilerCore::ChildStopped(OpEvent* op, int64_t now) {
  if (op->open_children > 0) --op->open_children;
  op->last_child_end_ns = std::max(op->last_child_end_ns, now);
  if (Done(op)) EmitReady();
}

void ProfilerCore::StopEvent(void* handle) {
  auto* e = static_cast<Event*>(handle);
  if (e == nullptr) return;
  ProfilerCore* core = e->core;
  absl::MutexLock lock(&core->mu_);
  if (e == &core->ignored_ || !core->live_.contains(e)) return;
  core->Stop(e);
}

void ProfilerCore::RecordEventState(void* handle, int state, const EventStateArgs* args) {
  auto* e = static_cast<Event*>(handle);
  if (e == nullptr) return;
  ProfilerCore* core = e->core;
  absl::MutexLock lock(&core->mu_);
  if (e == &core->ignored_ || !core->live_.contains(e)) return;
  core->State(e, state, args);
}

void ProfilerCore::State(Event* e, int state, const EventStateArgs* args) {
  const int64_t now = clock_.MonotonicNanos();
  if (e->kind == Kind::kKernelCh) {
    if (state == kKernelChStop && args != nullptr) {
      static_cast<KernelChEvent*>(e)->stop_timer = args->kernelCh.pTimer;
    }
    return;
  }
  if (e->kind != Kind::kProxyStep) return;
  auto* s = static_cast<StepEvent*>(e);
  const uint64_t size = args != nullptr ? args->proxyStep.transSize : 0;
  if (s->proxy_op->send) {
    if (state == kProxyStepSendWait && s->net_start < 0) {
      s->net_start = now;
      s->bytes = size;
    }
    return;
  }
  switch (state) {
    case kProxyStepRecvWait:
      if (s->net_start < 0) s->net_start = now;
      break;
    case kProxyStepRecvFlushWait:
    case kProxyStepRecvGpuWait:
      if (s->net_start >= 0 && s->net_end < 0) {
        s->net_end = now;
        s->bytes = size;
      }
      break;
    default:
      break;
  }
}

void ProfilerCore::Stop(Event* e) {
  const int64_t now = clock_.MonotonicNanos();
  switch (e->kind) {
    case Kind::kGroup:
      FreeEvent(e);  // Its ops keep its sequence number, not the handle.
      return;
    case Kind::kOp: {
      auto* op = static_cast<OpEvent*>(e);
      if (op->stopped) return;
      op->stopped = true;
      op->stop_ns = now;
      if (Done(op)) EmitReady();
      return;
    }
    case Kind::kProxyOp: {
      auto* p = static_cast<ProxyOpEvent*>(e);
      if (p->stopped) return;
      p->stopped = true;
      if (p->open_steps == 0) ReleaseProxyOp(p, now);
      return;
    }
    case Kind::kProxyStep: {
      auto* s = static_cast<StepEvent*>(e);
      ProxyOpEvent* p = s->proxy_op;
      StepDone(s, now);
      FreeEvent(s);
      if (p->open_steps > 0) --p->open_steps;
      if (p->open_steps == 0 && p->stopped) ReleaseProxyOp(p, now);
      return;
    }
    case Kind::kKernelCh: {
      auto* k = static_cast<KernelChEvent*>(e);
      OpEvent* op = k->op;
      if (k->start_timer != 0 && k->stop_timer >= k->start_timer) {
        if (op->kernel_start == 0 || k->start_timer < op->kernel_start) {
          op->kernel_start = k->start_timer;
        }
        op->kernel_stop = std::max(op->kernel_stop, k->stop_timer);
      }
      FreeEvent(k);
      ChildStopped(op, now);
      return;
    }
    case Kind::kIgnored:
      return;
  }
}

void ProfilerCore::ReleaseProxyOp(ProxyOpEvent* p, int64_t now) {
  OpEvent* op = p->op;
  FreeEvent(p);
  ChildStopped(op, now);
}

void ProfilerCore::StepDone(StepEvent* s, int64_t now) {
  const ProxyOpEvent* p = s->proxy_op;
  if (s->net_start < 0) {
    counters_->steps_without_network.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  const int64_t end = s->net_end >= 0 ? s->net_end : now;
  if (end < s->net_start) {
    counters_->steps_without_network.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  OpEvent* op = p->op;
  Transfer* t = nullptr;
  for (Transfer& x : op->transfers) {
    if (x.peer == p->peer && x.send == p->send) t = &x;
  }
  if (t == nullptr) {
    op->transfers.emplace_back();
    t = &op->transfers.back();
    t->peer = p->peer;
    t->send = p->send;
  }
  t->bytes = SaturatingAdd(t->bytes, s->bytes);
  if (p->channel >= 0 && p->channel < 256) t->channels.set(static_cast<size_t>(p->channel));
  AddInterval(t, s->net_start, end);
}

void ProfilerCore::AddInterval(Transfer* t, int64_t start, int64_t end) {
  auto& v = t->intervals;
  // First interval ending at or after `start`: it and the following ones starting at or before
  // `end` overlap [start, end] and merge with it.
  auto first = std::lower_bound(
      v.begin(), v.end(), start,
      [](const std::pair<int64_t, int64_t>& iv, int64_t s) { return iv.second < s; });
  auto last = first;
  while (last != v.end() && last->first <= end) {
    start = std::min(start, last->first);
    end = std::max(end, last->second);
    ++last;
  }
  first = v.erase(first, last);
  v.insert(first, {start, end});
  if (v.size() > options_.max_intervals && v.size() >= 2) {
    // Merge the two neighbours with the smallest gap (the gap then counts as busy).
    size_t best = 0;
    int64_t best_gap = std::numeric_limits<int64_t>::max();
    for (size_t i = 0; i + 1 < v.size(); ++i) {
      const int64_t gap = v[i + 1].first - v[i].second;
      if (gap < best_gap) {
        best_gap = gap;
        best = i;
      }
    }
    v[best].second = v[best + 1].second;
    v.erase(v.begin() + static_cast<std::ptrdiff_t>(best) + 1);
    counters_->intervals_coalesced.fetch_add(1, std::memory_order_relaxed);
  }
}

template <typename Ready>
void ProfilerCore::EmitIf(Ready ready) {
  // One pass: emitting an op frees only that op, so it makes no other op ready.
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (ready(*it)) {
      OpEvent* op = *it;
      it = pending_.erase(it);
      Emit(op);
    } else {
      ++it;
    }
  }
}

void ProfilerCore::EmitReady() {
  const int64_t now = clock_.MonotonicNanos();
  EmitIf([&](const OpEvent* op) {
    const bool settled = !op->had_children && now - op->stop_ns >= options_.settle_ns;
    return Done(op) && (op->group_seq < newest_child_group_ || settled);
  });
  while (pending_.size() > options_.max_pending_ops) {
    auto it = pending_.begin();
    while (it != pending_.end() && !Done(*it)) ++it;
    if (it == pending_.end()) break;  // All have open children: max_events bounds them.
    OpEvent* op = *it;
    pending_.erase(it);
    counters_->ops_forced.fetch_add(1, std::memory_order_relaxed);
    Emit(op);
  }
}

void ProfilerCore::Flush() {
  absl::MutexLock lock(&mu_);
  EmitIf([this](const OpEvent* op) { return Done(op); });
}

void ProfilerCore::Emit(OpEvent* op) {
  counters_->ops_emitted.fetch_add(1, std::memory_order_relaxed);
  for (const Transfer& t : op->transfers) {
    if (t.intervals.empty()) continue;
    falcon_shim_peer_transfer r{};
    r.struct_size = sizeof(r);
    r.op_kind = t.send ? FALCON_SHIM_OP_PEER_SEND : FALCON_SHIM_OP_PEER_RECV;
    r.nccl_comm = options_.handle;
    r.peer = t.peer;
    r.channels = static_cast<uint32_t>(std::max<size_t>(1, t.channels.count()));
    r.bytes = t.bytes;
    r.start_ns = t.intervals.front().first;
    r.end_ns = t.intervals.back().second;
    int64_t busy = 0;
    for (const auto& iv : t.intervals) busy += iv.second - iv.first;
    r.busy_ns = busy;
    r.iteration = -1;
    (sink_->RecordPeerTransfer(r) ? counters_->transfers_sent : counters_->transfers_refused)
        .fetch_add(1, std::memory_order_relaxed);
  }
  if (options_.emit_ops) {
    if (op->op_kind == 0) {
      counters_->ops_unknown.fetch_add(1, std::memory_order_relaxed);
    } else {
      falcon_shim_op r{};
      r.comm_id = 0;  // The shim uses the bound communicator.
      r.bytes = op->bytes;
      r.host_start_ns = op->start_ns;
      r.host_end_ns =
          std::max(op->start_ns, op->had_children ? op->last_child_end_ns : op->stop_ns);
      r.device_duration_ns = op->kernel_start != 0 && op->kernel_stop >= op->kernel_start
                                 ? static_cast<int64_t>(op->kernel_stop - op->kernel_start)
                                 : 0;
      r.iteration = -1;
      r.op_kind = op->op_kind;
      r.peer = op->peer;
      (sink_->RecordOp(r) ? counters_->op_records_sent : counters_->op_records_refused)
          .fetch_add(1, std::memory_order_relaxed);
    }
  }
  FreeEvent(op);
}

size_t ProfilerCore::live_events() const {
  absl::MutexLock lock(&mu_);
  return live_.size();
}

size_t ProfilerCore::pending_ops() const {
  absl::MutexLock lock(&mu_);
  return pending_.size();
}

}  // namespace falcon::trainer_shim::nccl_profiler
