"""ctypes bindings over libfalcon_shim.so, the trainer shim's C ABI (trainer_shim/falcon_shim.h).

Only this module knows the ABI's layout; the rest of the package uses Shim. The structs mirror
the header field for field (ABI version 4); struct_size lets the library read no further than
what this side knows. Times are CLOCK_MONOTONIC nanoseconds (falcon_shim_now_ns; the package
reads the same clock with time.clock_gettime_ns, ops.monotonic_ns).

Where the library is looked up, first match wins:
  0. the copy already in this process (the NCCL interposer's, LD_PRELOAD libfalcon_nccl.so): a
     process has one shim session, and a second copy of the library would hold a second one;
  1. $FALCON_SHIM_LIB (a path to libfalcon_shim.so);
  2. bazel-bin/trainer_shim/libfalcon_shim.so of the checkout this package sits in;
  3. the dynamic loader's search path (ldconfig, $LD_LIBRARY_PATH).
"""

import ctypes
import logging
import os

ABI_VERSION = 4  # The pipeline shape in the options, layer split directives (S2L).
SONAME = "libfalcon_shim.so"
log = logging.getLogger("falcon")

# Status codes (absl::StatusCode numbers).
OK = 0
INVALID_ARGUMENT = 3
RESOURCE_EXHAUSTED = 8
FAILED_PRECONDITION = 9
INTERNAL = 13

# falcon.v1.OpKind
OP_ALL_REDUCE = 1
OP_ALL_GATHER = 2
OP_REDUCE_SCATTER = 3
OP_BROADCAST = 4
OP_REDUCE = 5
OP_SEND = 6
OP_RECV = 7
OP_BARRIER = 8
OP_ALL_TO_ALL = 9

# falcon.v1.CommKind
COMM_UNKNOWN = 1
COMM_DP = 2
COMM_PP = 3
COMM_TP = 4
COMM_WORLD = 5

# Directive kinds handed to the trainer.
DIRECTIVE_MICRO_BATCH_PLAN = 10
DIRECTIVE_TOPOLOGY_CHANGE = 11
DIRECTIVE_CHECKPOINT_RESTART = 12
DIRECTIVE_LAYER_SPLIT = 16  # ABI version 4.

VALIDATION_GEMM = 5
VALIDATION_LINK_PASS = 6

_c = ctypes


class Options(_c.Structure):
    _fields_ = [
        ("struct_size", _c.c_uint32),
        ("node", _c.c_char_p),
        ("local_rank", _c.c_uint32),
        ("gpu", _c.c_int32),
        ("dp_index", _c.c_int32),
        ("pp_index", _c.c_int32),
        ("tp_index", _c.c_int32),
        ("dp_size", _c.c_uint32),
        ("pp_size", _c.c_uint32),
        ("tp_size", _c.c_uint32),
        ("global_micro_batches", _c.c_uint32),
        ("epoch", _c.c_uint64),
        ("ring_capacity", _c.c_uint32),
        ("max_buffered_records", _c.c_uint32),
        ("max_batch_records", _c.c_uint32),
        ("flush_interval_us", _c.c_uint32),
        ("reconnect_initial_ms", _c.c_uint32),
        ("reconnect_max_ms", _c.c_uint32),
        ("shutdown_flush_timeout_ms", _c.c_uint32),
        ("profiling", _c.c_int32),
        ("agreed_directives", _c.c_int32),  # ABI version 3.
        ("pipeline_blocks", _c.c_uint32),  # ABI version 4.
        ("block_state_bytes", _c.c_uint64),  # ABI version 4.
    ]


# Bytes falcon_shim_options_init may write (a newer library's larger struct): far more than any.
_OPTIONS_SCRATCH = 4096


class Op(_c.Structure):
    _fields_ = [
        ("comm_id", _c.c_uint64),
        ("bytes", _c.c_uint64),
        ("host_start_ns", _c.c_int64),
        ("host_end_ns", _c.c_int64),
        ("device_duration_ns", _c.c_int64),
        ("iteration", _c.c_int64),
        ("op_kind", _c.c_int32),
        ("peer", _c.c_int32),
    ]


class RankAssignment(_c.Structure):
    _fields_ = [
        ("rank", _c.c_uint32),
        ("dp_index", _c.c_uint32),
        ("pp_index", _c.c_uint32),
        ("tp_index", _c.c_uint32),
    ]


class Directive(_c.Structure):
    _fields_ = [
        ("struct_size", _c.c_uint32),
        ("kind", _c.c_int32),
        ("directive_id", _c.c_uint64),
        ("epoch", _c.c_uint64),
        ("effective_iteration", _c.c_int64),
        ("plan_version", _c.c_int64),
        ("reverts_directive_id", _c.c_uint64),
        ("reason", _c.c_char_p),
        ("micro_batches", _c.POINTER(_c.c_uint32)),
        ("micro_batches_len", _c.c_uint32),
        ("assignments", _c.POINTER(RankAssignment)),
        ("assignments_len", _c.c_uint32),
        ("checkpoint_dir", _c.c_char_p),
        ("excluded_ranks", _c.POINTER(_c.c_uint32)),
        ("excluded_ranks_len", _c.c_uint32),
        ("serialized", _c.c_void_p),
        ("serialized_len", _c.c_uint64),
        # LAYER_SPLIT (ABI version 4): stage s of DP group d holds
        # stage_blocks[d * pp_stages + s] blocks; micro_batches is the split's plan.
        ("stage_blocks", _c.POINTER(_c.c_uint32)),
        ("stage_blocks_len", _c.c_uint32),
        ("pp_stages", _c.c_uint32),
    ]


class Link(_c.Structure):
    _fields_ = [("src_rank", _c.c_uint32), ("dst_rank", _c.c_uint32)]


class ValidationTask(_c.Structure):
    _fields_ = [
        ("struct_size", _c.c_uint32),
        ("kind", _c.c_int32),
        ("task_id", _c.c_uint64),
        ("epoch", _c.c_uint64),
        ("repeats", _c.c_uint32),
        ("gemm_m", _c.c_uint32),
        ("gemm_n", _c.c_uint32),
        ("gemm_k", _c.c_uint32),
        ("pass_index", _c.c_uint32),
        ("links", _c.POINTER(Link)),
        ("links_len", _c.c_uint32),
        ("link_bytes", _c.c_uint64),
        ("comm_id", _c.c_uint64),
    ]


class LinkTiming(_c.Structure):
    _fields_ = [("link", Link), ("duration_ns", _c.c_int64), ("bytes", _c.c_uint64)]


class ValidationResult(_c.Structure):
    _fields_ = [
        ("gemm_duration_ns", _c.c_int64),
        ("gemm_flops", _c.c_double),
        ("link_timings", _c.POINTER(LinkTiming)),
        ("link_timings_capacity", _c.c_uint32),
        ("link_timings_len", _c.c_uint32),
        # The trainer's buffer for an error message: a c_void_p (its address), which the
        # package writes into; a c_char_p field would read as a copy of its bytes.
        ("error", _c.c_void_p),
        ("error_capacity", _c.c_uint32),
    ]


class Stats(_c.Structure):
    _fields_ = [
        ("struct_size", _c.c_uint32),
        ("connected", _c.c_int32),
        ("paused", _c.c_int32),
        ("profiling", _c.c_int32),
        ("epoch", _c.c_uint64),
        ("records_accepted", _c.c_uint64),
        ("records_dropped_ring", _c.c_uint64),
        ("records_evicted", _c.c_uint64),
        ("records_acked", _c.c_uint64),
        ("held_records", _c.c_uint64),
        ("batches_sent", _c.c_uint64),
        ("batches_resent", _c.c_uint64),
        ("connects", _c.c_uint64),
        ("directives_applied", _c.c_uint64),
        ("directives_rejected", _c.c_uint64),
        ("validation_tasks", _c.c_uint64),
        ("records_evicted_accepted", _c.c_uint64),
        ("records_unbound", _c.c_uint64),
    ]


DirectiveFn = _c.CFUNCTYPE(_c.c_int32, _c.c_void_p, _c.POINTER(Directive), _c.c_void_p,
                           _c.c_uint32)
PauseFn = _c.CFUNCTYPE(None, _c.c_void_p, _c.c_int32)
ValidationFn = _c.CFUNCTYPE(_c.c_int32, _c.c_void_p, _c.POINTER(ValidationTask),
                            _c.POINTER(ValidationResult))


class ShimError(RuntimeError):
    """A shim call failed: `status` is its code, the message the shim's reason."""

    def __init__(self, call, status, reason):
        super().__init__(f"{call}: status {status}: {reason}")
        self.call = call
        self.status = status
        self.reason = reason


def library_path():
    """The libfalcon_shim.so this process would load (see the module doc), or None."""
    env = os.environ.get("FALCON_SHIM_LIB")
    if env:
        return env
    here = os.path.dirname(os.path.abspath(__file__))
    built = os.path.join(here, "..", "..", "bazel-bin", "trainer_shim", "libfalcon_shim.so")
    if os.path.exists(built):
        return os.path.normpath(built)
    return None


def loaded():
    """The libfalcon_shim.so already in this process (by its soname), or None."""
    try:
        return _c.CDLL(SONAME, mode=os.RTLD_NOLOAD | _c.RTLD_GLOBAL)
    except OSError:
        return None


def load(path=None):
    """Loads the library (the copy already in the process, unless `path` is given); OSError
    naming the path tried when it cannot be loaded, RuntimeError on an ABI version this module
    does not know."""
    lib = None
    if path is None:
        lib = loaded()
        if lib is not None:
            path = SONAME + " (already in this process)"
            wanted = library_path()
            if wanted and os.environ.get("FALCON_SHIM_LIB"):
                log.info("falcon: using the shim library already loaded in this process (the "
                         "NCCL interposer's), not FALCON_SHIM_LIB=%s", wanted)
    path = path or library_path() or SONAME
    try:
        lib = lib or _c.CDLL(path)
    except OSError as e:
        raise OSError(f"falcon: cannot load the trainer shim library {path!r} ({e}); set "
                      "FALCON_SHIM_LIB or build //trainer_shim:libfalcon_shim.so") from e
    try:
        lib.falcon_shim_abi_version.restype = _c.c_uint32
    except AttributeError:
        raise OSError(f"falcon: {path!r} is not the trainer shim library (it has no "
                      "falcon_shim_abi_version); set FALCON_SHIM_LIB to libfalcon_shim.so") from None
    version = lib.falcon_shim_abi_version()
    if version < ABI_VERSION:
        raise RuntimeError(f"falcon: {path} has shim ABI version {version}, this package needs "
                           f">= {ABI_VERSION}")
    s = _c.c_int32
    sigs = {
        "falcon_shim_now_ns": (_c.c_int64, []),
        "falcon_shim_last_error": (_c.c_char_p, []),
        "falcon_shim_options_init": (None, [_c.POINTER(Options)]),
        "falcon_shim_init": (s, [_c.c_char_p, _c.c_uint32, _c.c_uint32, _c.c_char_p,
                                 _c.POINTER(Options)]),
        "falcon_shim_record_op": (s, [_c.POINTER(Op)]),
        "falcon_shim_register_comm": (s, [_c.c_uint64, _c.c_int32, _c.POINTER(_c.c_uint32),
                                          _c.c_uint32, _c.c_char_p]),
        "falcon_shim_iteration": (s, [_c.c_int64, _c.c_int64, _c.c_int64, _c.c_double,
                                      _c.c_int64]),
        "falcon_shim_poll_directives": (s, [_c.c_int64, DirectiveFn, _c.c_void_p]),
        "falcon_shim_pending_directives": (s, [_c.POINTER(_c.c_uint64), _c.POINTER(_c.c_int64),
                                               _c.c_uint32, _c.POINTER(_c.c_uint32)]),
        "falcon_shim_poll_agreed": (s, [_c.c_int64, _c.POINTER(_c.c_uint64), _c.c_uint32,
                                        DirectiveFn, _c.c_void_p]),
        "falcon_shim_set_pause_handler": (s, [PauseFn, _c.c_void_p]),
        "falcon_shim_set_validation_executor": (s, [ValidationFn, _c.c_void_p]),
        "falcon_shim_profiling_enabled": (_c.c_int32, []),
        "falcon_shim_get_stats": (s, [_c.POINTER(Stats)]),
        "falcon_shim_shutdown": (s, []),
    }
    for name, (restype, argtypes) in sigs.items():
        try:
            fn = getattr(lib, name)
        except AttributeError:
            raise OSError(f"falcon: {path} (shim ABI version {version}) lacks {name}: rebuild "
                          "//trainer_shim:libfalcon_shim.so") from None
        fn.restype = restype
        fn.argtypes = argtypes
    return lib


class Shim:
    """The shim of this process (one rank): thin, checked wrappers over the C calls. Every
    failing call raises ShimError with the shim's reason, except record_op (hot path), which
    returns the status (RESOURCE_EXHAUSTED: dropped and counted by the shim)."""

    def __init__(self, lib):
        self._lib = lib

    def _check(self, call, status):
        if status != OK:
            reason = self._lib.falcon_shim_last_error() or b""
            raise ShimError(call, status, reason.decode(errors="replace"))

    def default_options(self):
        """The library's defaults as this module's Options. falcon_shim_options_init writes the
        library's whole struct, which a newer library makes larger than Options: it fills a
        buffer with room to spare, and this module keeps its own part (struct_size its own)."""
        scratch = (_c.c_uint64 * (_OPTIONS_SCRATCH // 8))()  # 8-byte aligned.
        self._lib.falcon_shim_options_init(_c.cast(scratch, _c.POINTER(Options)))
        o = Options.from_buffer_copy(scratch, 0)
        o.struct_size = _c.sizeof(Options)
        return o

    def init(self, job, rank, world_size, agent_socket, options):
        self._check("init", self._lib.falcon_shim_init(
            job.encode(), rank, world_size, (agent_socket or "").encode(), _c.byref(options)))

    def register_comm(self, comm_id, kind, members, name):
        arr = (_c.c_uint32 * len(members))(*members)
        self._check(f"register_comm {name}", self._lib.falcon_shim_register_comm(
            comm_id, kind, arr, len(members), name.encode()))

    def record_op(self, op):
        return self._lib.falcon_shim_record_op(_c.byref(op))

    def iteration(self, iteration, start_ns, end_ns, loss, plan_version):
        self._check(f"iteration {iteration}", self._lib.falcon_shim_iteration(
            iteration, start_ns, end_ns, loss, plan_version))

    def poll_directives(self, iteration, fn):
        self._check(f"poll_directives {iteration}",
                    self._lib.falcon_shim_poll_directives(iteration, fn, None))

    def pending_directives(self, capacity):
        """(the job-wide directives this rank holds, as [(id, effective_iteration)] ascending by
        id, at most `capacity`; how many it holds)."""
        ids = (_c.c_uint64 * capacity)()
        effective = (_c.c_int64 * capacity)()
        count = _c.c_uint32(0)
        self._check("pending_directives", self._lib.falcon_shim_pending_directives(
            ids, effective, capacity, _c.byref(count)))
        n = min(count.value, capacity)
        return [(ids[i], effective[i]) for i in range(n)], count.value

    def poll_agreed(self, iteration, ids, fn):
        arr = (_c.c_uint64 * max(1, len(ids)))(*ids)
        self._check(f"poll_agreed {iteration}",
                    self._lib.falcon_shim_poll_agreed(iteration, arr, len(ids), fn, None))

    def set_pause_handler(self, fn):
        self._check("set_pause_handler", self._lib.falcon_shim_set_pause_handler(fn, None))

    def set_validation_executor(self, fn):
        self._check("set_validation_executor",
                    self._lib.falcon_shim_set_validation_executor(fn, None))

    def profiling_enabled(self):
        return self._lib.falcon_shim_profiling_enabled() == 1

    def stats(self):
        st = Stats()
        st.struct_size = _c.sizeof(Stats)
        self._check("get_stats", self._lib.falcon_shim_get_stats(_c.byref(st)))
        return {name: getattr(st, name) for name, _ in Stats._fields_ if name != "struct_size"}

    def shutdown(self):
        self._check("shutdown", self._lib.falcon_shim_shutdown())
