// The C ABI (falcon_shim.h) over the global Shim. Every entry point catches everything.
#include "trainer_shim/falcon_shim.h"

#include <time.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "proto/falcon/v1/common.pb.h"
#include "trainer_shim/shim.h"
#include "trainer_shim/shim_global.h"

// The C ABI cannot include protobuf, so it repeats the wire enums as integer constants; the wire
// contract (proto/falcon/v1/common.proto) is their single source, and this file does not compile
// when the two drift apart (a value changed, or a value added to the proto but not to the ABI).
static_assert(FALCON_SHIM_OP_ALL_REDUCE == falcon::v1::OP_KIND_ALL_REDUCE);
static_assert(FALCON_SHIM_OP_ALL_GATHER == falcon::v1::OP_KIND_ALL_GATHER);
static_assert(FALCON_SHIM_OP_REDUCE_SCATTER == falcon::v1::OP_KIND_REDUCE_SCATTER);
static_assert(FALCON_SHIM_OP_BROADCAST == falcon::v1::OP_KIND_BROADCAST);
static_assert(FALCON_SHIM_OP_REDUCE == falcon::v1::OP_KIND_REDUCE);
static_assert(FALCON_SHIM_OP_SEND == falcon::v1::OP_KIND_SEND);
static_assert(FALCON_SHIM_OP_RECV == falcon::v1::OP_KIND_RECV);
static_assert(FALCON_SHIM_OP_BARRIER == falcon::v1::OP_KIND_BARRIER);
static_assert(FALCON_SHIM_OP_ALL_TO_ALL == falcon::v1::OP_KIND_ALL_TO_ALL);
static_assert(FALCON_SHIM_OP_PEER_SEND == falcon::v1::OP_KIND_PEER_SEND);
static_assert(FALCON_SHIM_OP_PEER_RECV == falcon::v1::OP_KIND_PEER_RECV);
static_assert(falcon::v1::OpKind_MAX == FALCON_SHIM_OP_PEER_RECV,
              "a new falcon.v1.OpKind needs its FALCON_SHIM_OP_* constant");
static_assert(FALCON_SHIM_COMM_UNKNOWN == falcon::v1::COMM_KIND_UNKNOWN);
static_assert(FALCON_SHIM_COMM_DP == falcon::v1::COMM_KIND_DP);
static_assert(FALCON_SHIM_COMM_PP == falcon::v1::COMM_KIND_PP);
static_assert(FALCON_SHIM_COMM_TP == falcon::v1::COMM_KIND_TP);
static_assert(FALCON_SHIM_COMM_WORLD == falcon::v1::COMM_KIND_WORLD);
static_assert(falcon::v1::CommKind_MAX == FALCON_SHIM_COMM_WORLD,
              "a new falcon.v1.CommKind needs its FALCON_SHIM_COMM_* constant");
// Directive kinds are the Directive.kind oneof's field numbers.
static_assert(FALCON_SHIM_DIRECTIVE_MICRO_BATCH_PLAN == falcon::v1::Directive::kMicroBatchPlan);
static_assert(FALCON_SHIM_DIRECTIVE_TOPOLOGY_CHANGE == falcon::v1::Directive::kTopologyChange);
static_assert(FALCON_SHIM_DIRECTIVE_CHECKPOINT_RESTART ==
              falcon::v1::Directive::kCheckpointRestart);
static_assert(FALCON_SHIM_DIRECTIVE_LAYER_SPLIT == falcon::v1::Directive::kLayerSplit);

namespace falcon::trainer_shim {
namespace {

thread_local char t_last_error[512];

void SetError(absl::string_view message) {
  const size_t n = std::min(message.size(), sizeof(t_last_error) - 1);
  std::memcpy(t_last_error, message.data(), n);
  t_last_error[n] = '\0';
}

falcon_shim_status Report(const absl::Status& status) {
  if (status.ok()) return FALCON_SHIM_OK;
  SetError(status.message());
  return static_cast<falcon_shim_status>(status.code());
}

// The shim's record of a C ABI op (seq is assigned by Shim::RecordOp).
falcon::trainer_shim::OpRecord FromC(const falcon_shim_op& op) {
  falcon::trainer_shim::OpRecord r;
  r.comm_id = op.comm_id;
  r.bytes = op.bytes;
  r.host_start_ns = op.host_start_ns;
  r.host_end_ns = op.host_end_ns;
  r.device_duration_ns = op.device_duration_ns;
  r.iteration = op.iteration;
  r.op_kind = static_cast<falcon::trainer_shim::OpKind>(op.op_kind);
  r.peer = op.peer;
  return r;
}

falcon_shim_status NotInitialized() {
  SetError("falcon shim is not initialized");
  return FALCON_SHIM_FAILED_PRECONDITION;
}

falcon_shim_status Internal() {
  SetError("internal error in the falcon shim");
  return FALCON_SHIM_INTERNAL;
}

std::string Bounded(const char* s, uint32_t capacity) {
  if (s == nullptr || capacity == 0) return "";
  return std::string(s, strnlen(s, capacity));
}

// The end of falcon_shim_options' ABI-4 fields (pipeline_blocks, block_state_bytes): a caller's
// struct_size below it is an older ABI's struct, whose tail padding may reach into them.
constexpr size_t kOptionsAbi4End =
    offsetof(falcon_shim_options, block_state_bytes) + sizeof(uint64_t);
static_assert(offsetof(falcon_shim_options, pipeline_blocks) == 100,
              "ABI 3's falcon_shim_options ends at byte 100 (sizeof 104 with its tail padding)");

// Reads a caller's struct that declares its own size, never past what either side knows. The
// bytes are copied as they are: a field an older struct covers only with its tail padding needs
// the caller's own check of struct_size (kOptionsAbi4End).
template <typename T>
T ReadSized(const T* in, T defaults) {
  if (in == nullptr) return defaults;
  T out = defaults;
  const size_t n = std::min<size_t>(in->struct_size, sizeof(T));
  std::memcpy(static_cast<void*>(&out), in, n);
  out.struct_size = sizeof(T);
  return out;
}

absl::Status CallDirectiveFn(falcon_shim_directive_fn fn, void* user,
                             const falcon::v1::Directive& d) {
  falcon_shim_directive c{};
  c.struct_size = sizeof(c);
  c.kind = static_cast<int32_t>(d.kind_case());
  c.directive_id = d.directive_id();
  c.epoch = d.epoch();
  c.effective_iteration = d.effective_iteration();
  c.plan_version = d.plan_version();
  c.reverts_directive_id = d.reverts_directive_id();
  c.reason = d.reason().c_str();
  std::vector<falcon_shim_rank_assignment> assignments;
  std::vector<uint32_t> stage_blocks;
  if (d.has_micro_batch_plan()) {
    c.micro_batches = d.micro_batch_plan().micro_batches().data();
    c.micro_batches_len = static_cast<uint32_t>(d.micro_batch_plan().micro_batches_size());
  } else if (d.has_layer_split()) {
    // The intake checked that every replica has as many stages.
    const falcon::v1::LayerSplit& split = d.layer_split();
    c.micro_batches = split.micro_batches().data();
    c.micro_batches_len = static_cast<uint32_t>(split.micro_batches_size());
    c.pp_stages =
        split.replicas().empty() ? 0 : static_cast<uint32_t>(split.replicas(0).stage_blocks_size());
    for (const falcon::v1::ReplicaSplit& r : split.replicas()) {
      stage_blocks.insert(stage_blocks.end(), r.stage_blocks().begin(), r.stage_blocks().end());
    }
    c.stage_blocks = stage_blocks.data();
    c.stage_blocks_len = static_cast<uint32_t>(stage_blocks.size());
  } else if (d.has_topology_change()) {
    for (const auto& a : d.topology_change().assignments()) {
      assignments.push_back({a.rank(), a.dp_index(), a.pp_index(), a.tp_index()});
    }
    c.assignments = assignments.data();
    c.assignments_len = static_cast<uint32_t>(assignments.size());
  } else if (d.has_checkpoint_restart()) {
    c.checkpoint_dir = d.checkpoint_restart().checkpoint_dir().c_str();
    c.excluded_ranks = d.checkpoint_restart().excluded_ranks().data();
    c.excluded_ranks_len = static_cast<uint32_t>(d.checkpoint_restart().excluded_ranks_size());
  }
  const std::string wire = d.SerializeAsString();
  c.serialized = wire.data();
  c.serialized_len = wire.size();
  char reason[512] = {};
  const int32_t rc = fn(user, &c, reason, sizeof(reason));
  if (rc == 0) return absl::OkStatus();
  const std::string why = Bounded(reason, sizeof(reason));
  return absl::AbortedError(why.empty() ? "rejected by the trainer (no reason given)" : why);
}

absl::StatusOr<falcon::v1::ValidationResult> CallValidationFn(falcon_shim_validation_fn fn,
                                                              void* user,
                                                              const falcon::v1::ValidationTask& t) {
  falcon_shim_validation_task c{};
  c.struct_size = sizeof(c);
  c.kind = static_cast<int32_t>(t.test_case());
  c.task_id = t.task_id();
  c.epoch = t.epoch();
  std::vector<falcon_shim_link> links;
  if (t.has_gemm()) {
    c.gemm_m = t.gemm().m();
    c.gemm_n = t.gemm().n();
    c.gemm_k = t.gemm().k();
    c.repeats = t.gemm().repeats();
  } else if (t.has_link_pass()) {
    for (const auto& l : t.link_pass().links()) links.push_back({l.src_rank(), l.dst_rank()});
    c.pass_index = t.link_pass().pass_index();
    c.links = links.data();
    c.links_len = static_cast<uint32_t>(links.size());
    c.link_bytes = t.link_pass().bytes();
    c.comm_id = t.link_pass().comm_id();
    c.repeats = t.link_pass().repeats();
  }
  std::vector<falcon_shim_link_timing> timings(links.size());
  char error[512] = {};
  falcon_shim_validation_result r{};
  r.link_timings = timings.data();
  r.link_timings_capacity = static_cast<uint32_t>(timings.size());
  r.error = error;
  r.error_capacity = sizeof(error);
  const int32_t rc = fn(user, &c, &r);
  if (rc != 0) {
    const std::string why = Bounded(error, sizeof(error));
    return absl::InternalError(why.empty() ? "validation executor failed (no reason given)" : why);
  }
  falcon::v1::ValidationResult out;
  out.set_gemm_duration_ns(r.gemm_duration_ns);
  out.set_gemm_flops(r.gemm_flops);
  const uint32_t n = std::min(r.link_timings_len, r.link_timings_capacity);
  for (uint32_t i = 0; i < n; ++i) {
    falcon::v1::LinkTiming* lt = out.add_links();
    lt->mutable_link()->set_src_rank(timings[i].link.src_rank);
    lt->mutable_link()->set_dst_rank(timings[i].link.dst_rank);
    lt->set_duration_ns(timings[i].duration_ns);
    lt->set_bytes(timings[i].bytes);
  }
  return out;
}

}  // namespace
}  // namespace falcon::trainer_shim

using falcon::trainer_shim::GlobalShim;
using falcon::trainer_shim::Internal;
using falcon::trainer_shim::NotInitialized;
using falcon::trainer_shim::Report;

extern "C" {

uint32_t falcon_shim_abi_version(void) { return FALCON_SHIM_ABI_VERSION; }

int64_t falcon_shim_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

const char* falcon_shim_last_error(void) { return falcon::trainer_shim::t_last_error; }

void falcon_shim_options_init(falcon_shim_options* options) {
  if (options == nullptr) return;
  const falcon::trainer_shim::ShimOptions d;
  *options = falcon_shim_options{};
  options->struct_size = sizeof(falcon_shim_options);
  options->node = nullptr;
  options->gpu = d.gpu;
  options->dp_index = d.dp_index;
  options->pp_index = d.pp_index;
  options->tp_index = d.tp_index;
  options->ring_capacity = d.ring_capacity;
  options->max_buffered_records = d.max_buffered_records;
  options->max_batch_records = d.max_batch_records;
  options->flush_interval_us = static_cast<uint32_t>(absl::ToInt64Microseconds(d.flush_interval));
  options->reconnect_initial_ms =
      static_cast<uint32_t>(absl::ToInt64Milliseconds(d.reconnect_backoff.initial));
  options->reconnect_max_ms =
      static_cast<uint32_t>(absl::ToInt64Milliseconds(d.reconnect_backoff.max));
  options->shutdown_flush_timeout_ms =
      static_cast<uint32_t>(absl::ToInt64Milliseconds(d.shutdown_flush_timeout));
  options->profiling = 0;
  options->agreed_directives = 0;
  options->pipeline_blocks = d.pipeline_blocks;
  options->block_state_bytes = d.block_state_bytes;
}

falcon_shim_status falcon_shim_init(const char* job, uint32_t rank, uint32_t world_size,
                                    const char* agent_socket, const falcon_shim_options* options) {
  try {
    falcon_shim_options defaults;
    falcon_shim_options_init(&defaults);
    falcon_shim_options o = falcon::trainer_shim::ReadSized(options, defaults);
    // The ABI-4 fields only from a struct that has them whole: an ABI-3 struct's sizeof (104)
    // takes in 4 bytes of tail padding where pipeline_blocks now sits.
    if (options != nullptr && options->struct_size < falcon::trainer_shim::kOptionsAbi4End) {
      o.pipeline_blocks = defaults.pipeline_blocks;
      o.block_state_bytes = defaults.block_state_bytes;
    }
    if (job == nullptr) return Report(absl::InvalidArgumentError("job: NULL"));
    falcon::trainer_shim::ShimOptions s;
    s.job = job;
    s.rank = rank;
    s.world_size = world_size;
    s.agent_socket = agent_socket == nullptr ? "" : agent_socket;
    if (o.node != nullptr) s.node = o.node;
    s.local_rank = o.local_rank;
    s.gpu = o.gpu;
    s.dp_index = o.dp_index;
    s.pp_index = o.pp_index;
    s.tp_index = o.tp_index;
    s.dp_size = o.dp_size;
    s.pp_size = o.pp_size;
    s.tp_size = o.tp_size;
    s.global_micro_batches = o.global_micro_batches;
    s.epoch = o.epoch;
    s.ring_capacity = o.ring_capacity;
    s.max_buffered_records = o.max_buffered_records;
    s.max_batch_records = o.max_batch_records;
    s.flush_interval = absl::Microseconds(o.flush_interval_us);
    s.reconnect_backoff.initial = absl::Milliseconds(o.reconnect_initial_ms);
    s.reconnect_backoff.max = absl::Milliseconds(o.reconnect_max_ms);
    s.shutdown_flush_timeout = absl::Milliseconds(o.shutdown_flush_timeout_ms);
    s.profiling = o.profiling != 0;
    s.agreed_directives = o.agreed_directives != 0;
    s.pipeline_blocks = o.pipeline_blocks;
    s.block_state_bytes = o.block_state_bytes;
    return Report(falcon::trainer_shim::InitGlobalShim(std::move(s)));
  } catch (...) {
    return Internal();
  }
}

falcon_shim_status falcon_shim_record_op(const falcon_shim_op* op) {
  try {
    falcon::trainer_shim::Shim* shim = GlobalShim();
    if (shim == nullptr) return NotInitialized();
    if (op == nullptr) return Report(absl::InvalidArgumentError("op: NULL"));
    const falcon::trainer_shim::OpRecord r = falcon::trainer_shim::FromC(*op);
    absl::Status s = shim->RecordOp(r);
    return s.ok() ? FALCON_SHIM_OK : Report(s);
  } catch (...) {
    return Internal();
  }
}

falcon_shim_status falcon_shim_register_comm(uint64_t comm_id, int32_t kind,
                                             const uint32_t* member_ranks, uint32_t member_count,
                                             const char* name) {
  try {
    falcon::trainer_shim::Shim* shim = GlobalShim();
    if (shim == nullptr) return NotInitialized();
    if (member_ranks == nullptr && member_count > 0) {
      return Report(absl::InvalidArgumentError("member_ranks: NULL"));
    }
    falcon::trainer_shim::CommunicatorInfo c;
    c.comm_id = comm_id;
    c.kind = static_cast<falcon::trainer_shim::CommKind>(kind);
    if (member_count > 0) c.member_ranks.assign(member_ranks, member_ranks + member_count);
    if (name != nullptr) c.name = name;
    return Report(shim->RegisterCommunicator(c));
  } catch (...) {
    return Internal();
  }
}

falcon_shim_status falcon_shim_iteration(int64_t iteration, int64_t start_ns, int64_t end_ns,
                                         double loss, int64_t plan_version) {
  try {
    falcon::trainer_shim::Shim* shim = GlobalShim();
    if (shim == nullptr) return NotInitialized();
    return Report(shim->RecordIteration({iteration, start_ns, end_ns, loss, plan_version}));
  } catch (...) {
    return Internal();
  }
}

falcon_shim_status falcon_shim_poll_directives(int64_t iteration, falcon_shim_directive_fn fn,
                                               void* user_data) {
  try {
    falcon::trainer_shim::Shim* shim = GlobalShim();
    if (shim == nullptr) return NotInitialized();
    falcon::trainer_shim::Shim::DirectiveHandler handler;
    if (fn != nullptr) {
      handler = [fn, user_data](const falcon::v1::Directive& d) {
        return falcon::trainer_shim::CallDirectiveFn(fn, user_data, d);
      };
    }
    return Report(shim->PollDirectives(iteration, handler));
  } catch (...) {
    return Internal();
  }
}

falcon_shim_status falcon_shim_pending_directives(uint64_t* ids, int64_t* effective_iterations,
                                                  uint32_t capacity, uint32_t* count) {
  try {
    falcon::trainer_shim::Shim* shim = GlobalShim();
    if (shim == nullptr) return NotInitialized();
    if (count == nullptr || (capacity > 0 && (ids == nullptr || effective_iterations == nullptr))) {
      return Report(absl::InvalidArgumentError("count NULL, or ids/effective_iterations NULL"));
    }
    const std::vector<falcon::trainer_shim::DirectiveIntake::PendingId> pending =
        shim->PendingAgreed();
    *count = static_cast<uint32_t>(pending.size());
    for (size_t i = 0; i < pending.size() && i < capacity; ++i) {
      ids[i] = pending[i].directive_id;
      effective_iterations[i] = pending[i].effective_iteration;
    }
    return FALCON_SHIM_OK;
  } catch (...) {
    return Internal();
  }
}

falcon_shim_status falcon_shim_poll_agreed(int64_t iteration, const uint64_t* ids, uint32_t n,
                                           falcon_shim_directive_fn fn, void* user_data) {
  try {
    falcon::trainer_shim::Shim* shim = GlobalShim();
    if (shim == nullptr) return NotInitialized();
    if (n > 0 && ids == nullptr) return Report(absl::InvalidArgumentError("ids: NULL, n > 0"));
    const absl::flat_hash_set<uint64_t> agreed(ids, ids + n);
    falcon::trainer_shim::Shim::DirectiveHandler handler;
    if (fn != nullptr) {
      handler = [fn, user_data](const falcon::v1::Directive& d) {
        return falcon::trainer_shim::CallDirectiveFn(fn, user_data, d);
      };
    }
    return Report(shim->PollDirectives(iteration, handler, &agreed));
  } catch (...) {
    return Internal();
  }
}

falcon_shim_status falcon_shim_set_pause_handler(falcon_shim_pause_fn fn, void* user_data) {
  try {
    falcon::trainer_shim::Shim* shim = GlobalShim();
    if (shim == nullptr) return NotInitialized();
    if (fn == nullptr) {
      shim->SetPauseHandler(nullptr);
    } else {
      shim->SetPauseHandler([fn, user_data](bool paused) { fn(user_data, paused ? 1 : 0); });
    }
    return FALCON_SHIM_OK;
  } catch (...) {
    return Internal();
  }
}

falcon_shim_status falcon_shim_set_validation_executor(falcon_shim_validation_fn fn,
                                                       void* user_data) {
  try {
    falcon::trainer_shim::Shim* shim = GlobalShim();
    if (shim == nullptr) return NotInitialized();
    if (fn == nullptr) {
      shim->SetValidationExecutor(nullptr);
    } else {
      shim->SetValidationExecutor([fn, user_data](const falcon::v1::ValidationTask& t) {
        return falcon::trainer_shim::CallValidationFn(fn, user_data, t);
      });
    }
    return FALCON_SHIM_OK;
  } catch (...) {
    return Internal();
  }
}

int32_t falcon_shim_profiling_enabled(void) {
  falcon::trainer_shim::Shim* shim = GlobalShim();
  return shim != nullptr && shim->profiling() ? 1 : 0;
}

falcon_shim_status falcon_shim_get_stats(falcon_shim_stats* stats) {
  try {
    falcon::trainer_shim::Shim* shim = GlobalShim();
    if (shim == nullptr) return NotInitialized();
    if (stats == nullptr || stats->struct_size == 0) {
      return Report(absl::InvalidArgumentError("stats: NULL or struct_size 0"));
    }
    const falcon::trainer_shim::Shim::Stats s = shim->stats();
    falcon_shim_stats c{};
    c.struct_size = sizeof(c);
    c.connected = s.link.connected;
    c.paused = s.paused;
    c.profiling = s.profiling;
    c.epoch = s.epoch;
    c.records_accepted = s.records_accepted;
    c.records_dropped_ring = s.records_dropped_ring;
    c.records_evicted = s.link.records_evicted;
    c.records_acked = s.link.records_acked;
    c.held_records = s.link.held_records;
    c.batches_sent = s.link.batches_sent;
    c.batches_resent = s.link.batches_resent;
    c.connects = s.link.connects;
    c.directives_applied = s.directives_applied;
    c.directives_rejected = s.directives_rejected;
    c.validation_tasks = s.validation_tasks;
    c.records_evicted_accepted = s.link.records_evicted_accepted;
    c.records_unbound = falcon::trainer_shim::GlobalNcclCommBindings().unbound();
    const uint32_t caller_size = stats->struct_size;
    std::memcpy(static_cast<void*>(stats), &c, std::min<size_t>(caller_size, sizeof(c)));
    stats->struct_size = std::min<uint32_t>(caller_size, sizeof(c));
    return FALCON_SHIM_OK;
  } catch (...) {
    return Internal();
  }
}

falcon_shim_status falcon_shim_nccl_comm_open(uint64_t handle, uint32_t nranks, uint32_t rank) {
  try {
    return Report(falcon::trainer_shim::GlobalNcclCommBindings().Open(handle, nranks, rank));
  } catch (...) {
    return Internal();
  }
}

falcon_shim_status falcon_shim_nccl_comm_bind(uint32_t nranks, uint32_t rank, uint64_t comm_id,
                                              const uint32_t* member_ranks, uint32_t member_count) {
  try {
    if (member_ranks == nullptr && member_count > 0) {
      return Report(absl::InvalidArgumentError("member_ranks: NULL"));
    }
    std::vector<uint32_t> members;
    if (member_count > 0) members.assign(member_ranks, member_ranks + member_count);
    return Report(falcon::trainer_shim::GlobalNcclCommBindings().Bind(nranks, rank, comm_id,
                                                                      std::move(members)));
  } catch (...) {
    return Internal();
  }
}

falcon_shim_status falcon_shim_nccl_comm_close(uint64_t handle) {
  try {
    return Report(falcon::trainer_shim::GlobalNcclCommBindings().Close(handle));
  } catch (...) {
    return Internal();
  }
}

int32_t falcon_shim_nccl_comm_bound(uint64_t handle) {
  try {
    return falcon::trainer_shim::GlobalNcclCommBindings().CommId(handle).has_value() ? 1 : 0;
  } catch (...) {
    return 0;
  }
}

falcon_shim_status falcon_shim_record_peer_transfer(const falcon_shim_peer_transfer* t) {
  try {
    falcon::trainer_shim::Shim* shim = GlobalShim();
    if (shim == nullptr) return NotInitialized();
    if (t == nullptr) return Report(absl::InvalidArgumentError("transfer: NULL"));
    if (t->struct_size < sizeof(falcon_shim_peer_transfer)) {
      return Report(absl::InvalidArgumentError("transfer.struct_size: smaller than ABI v1"));
    }
    if (t->op_kind != FALCON_SHIM_OP_PEER_SEND && t->op_kind != FALCON_SHIM_OP_PEER_RECV) {
      return Report(absl::InvalidArgumentError("transfer.op_kind: not PEER_SEND or PEER_RECV"));
    }
    if (t->channels == 0) return Report(absl::InvalidArgumentError("transfer.channels: 0"));
    if (t->start_ns < 0 || t->end_ns < t->start_ns) {
      return Report(absl::InvalidArgumentError("transfer.end_ns: need 0 <= start_ns <= end_ns"));
    }
    if (t->busy_ns < 0 || t->busy_ns > t->end_ns - t->start_ns) {
      return Report(absl::InvalidArgumentError("transfer.busy_ns: outside [0, end_ns - start_ns]"));
    }
    falcon::trainer_shim::NcclCommBindings& bindings =
        falcon::trainer_shim::GlobalNcclCommBindings();
    // A peer transfer always names its peer: -1 is outside the communicator too.
    const absl::StatusOr<falcon::trainer_shim::NcclCommBindings::Resolved> b =
        t->peer < 0 ? absl::FailedPreconditionError("transfer.peer: negative")
                    : bindings.Resolve(t->nccl_comm, t->peer, "transfer");
    if (!b.ok()) {
      bindings.CountUnbound();
      return Report(b.status());
    }
    falcon::trainer_shim::OpRecord r;
    r.comm_id = b->comm_id;
    r.bytes = t->bytes;
    r.host_start_ns = t->start_ns;
    r.host_end_ns = t->end_ns;
    r.device_duration_ns = t->busy_ns;
    r.iteration = t->iteration;
    r.op_kind = static_cast<falcon::trainer_shim::OpKind>(t->op_kind);
    r.peer = b->global_rank;
    return Report(shim->RecordOp(r));
  } catch (...) {
    return Internal();
  }
}

falcon_shim_status falcon_shim_record_nccl_op(uint64_t handle, const falcon_shim_op* op) {
  try {
    falcon::trainer_shim::Shim* shim = GlobalShim();
    if (shim == nullptr) return NotInitialized();
    if (op == nullptr) return Report(absl::InvalidArgumentError("op: NULL"));
    if (op->op_kind == FALCON_SHIM_OP_PEER_SEND || op->op_kind == FALCON_SHIM_OP_PEER_RECV) {
      return Report(absl::InvalidArgumentError(
          "op.op_kind: peer transfers go through falcon_shim_record_peer_transfer"));
    }
    falcon::trainer_shim::NcclCommBindings& bindings =
        falcon::trainer_shim::GlobalNcclCommBindings();
    const bool p2p = op->op_kind == FALCON_SHIM_OP_SEND || op->op_kind == FALCON_SHIM_OP_RECV;
    const absl::StatusOr<falcon::trainer_shim::NcclCommBindings::Resolved> b =
        p2p && op->peer < 0 ? absl::FailedPreconditionError("op.peer: negative")
                            : bindings.Resolve(handle, p2p ? op->peer : -1, "op");
    if (!b.ok()) {
      bindings.CountUnbound();
      return Report(b.status());
    }
    falcon::trainer_shim::OpRecord r = falcon::trainer_shim::FromC(*op);
    r.comm_id = b->comm_id;
    r.peer = b->global_rank;
    return Report(shim->RecordOp(r));
  } catch (...) {
    return Internal();
  }
}

falcon_shim_status falcon_shim_shutdown(void) {
  try {
    return Report(falcon::trainer_shim::ShutdownGlobalShim());
  } catch (...) {
    return Internal();
  }
}

falcon_shim_status falcon_shim_set_shutdown_hook(falcon_shim_shutdown_hook_fn fn, void* user_data) {
  try {
    falcon::trainer_shim::SetGlobalShutdownHook(fn, user_data);
    return FALCON_SHIM_OK;
  } catch (...) {
    return Internal();
  }
}

}  // extern "C"
