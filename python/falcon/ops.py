"""Times torch.distributed collectives and point-to-point ops for the shim.

OpTimer replaces the functions of torch.distributed named in TIMED (the module attributes, so
code that calls `dist.all_reduce(...)` is timed; a function imported by name before falcon.init
is not) with wrappers that record one op per call: host start and end (CLOCK_MONOTONIC ns), the
bytes this rank contributes, the communicator (the group's comm id) and, for send/recv, the peer's
global rank. An async op (async_op=True, isend, irecv) returns a TimedWork whose wait(), or the
completion of its get_future(), ends the op (so DistributedDataParallel's Python communication
hooks are timed: Session.time_ddp). Ops on NCCL groups are left to the NCCL LD_PRELOAD shim (not
counted twice). uninstall() puts the originals back.
"""

import functools
import inspect
import threading
import time

import torch
import torch.distributed as dist

from falcon import _shim

# name -> (op kind, name of the argument this rank contributes (None: no bytes), name of the peer
# argument or None). Where each argument sits positionally comes from the function's signature.
TIMED = {
    "all_reduce": (_shim.OP_ALL_REDUCE, "tensor", None),
    "broadcast": (_shim.OP_BROADCAST, "tensor", None),
    "reduce": (_shim.OP_REDUCE, "tensor", None),
    "all_gather": (_shim.OP_ALL_GATHER, "tensor", None),
    "reduce_scatter": (_shim.OP_REDUCE_SCATTER, "input_list", None),
    "all_to_all": (_shim.OP_ALL_TO_ALL, "input_tensor_list", None),
    "barrier": (_shim.OP_BARRIER, None, None),
    "send": (_shim.OP_SEND, "tensor", "dst"),
    "recv": (_shim.OP_RECV, "tensor", "src"),
    "isend": (_shim.OP_SEND, "tensor", "dst"),
    "irecv": (_shim.OP_RECV, "tensor", "src"),
}
_ASYNC_ALWAYS = {"isend", "irecv"}


class _Arg:
    """Reads one named argument of a call, positional or keyword."""

    def __init__(self, fn, name):
        self.name = name
        self.index = None
        self.default = None
        if name is None:
            return
        try:
            params = list(inspect.signature(fn).parameters.values())
        except (TypeError, ValueError):
            params = []
        for i, p in enumerate(params):
            if p.name == name:
                self.index = i
                if p.default is not inspect.Parameter.empty:
                    self.default = p.default

    def get(self, args, kwargs):
        if self.name is None:
            return None
        if self.index is not None and len(args) > self.index:
            return args[self.index]
        return kwargs.get(self.name, self.default)


# CLOCK_MONOTONIC ns, the shim's clock (falcon_shim_now_ns), read without a ctypes call; a
# partial (C-implemented) because every timed op reads it twice.
monotonic_ns = functools.partial(time.clock_gettime_ns, time.CLOCK_MONOTONIC)


def group_key(group):
    """Dictionary key of a process group (None and the default group are the world)."""
    if group is None or group is dist.GroupMember.WORLD:
        return "world"
    return id(group)


def group_ranks(group):
    """Global ranks of `group` (None: the world), ascending."""
    if group is None or group is dist.GroupMember.WORLD:
        return list(range(dist.get_world_size()))
    getter = getattr(dist, "get_process_group_ranks", None)
    if getter is not None:
        return sorted(getter(group))
    return sorted(dist.distributed_c10d._pg_group_ranks[group].keys())


def _nbytes(x):
    if isinstance(x, torch.Tensor):
        return x.numel() * x.element_size()
    if isinstance(x, (list, tuple)):
        return sum(_nbytes(t) for t in x)
    return 0


def is_nccl(group):
    """Whether `group` (None: the world) runs on NCCL, whose ops the LD_PRELOAD shim times."""
    try:
        return dist.get_backend(group) == "nccl"
    except Exception:  # An unknown group: time it.
        return False


class TimedWork:
    """An async op's Work: the op is recorded once, when wait() returns or when the future from
    get_future() completes (as DistributedDataParallel's communication hooks use it), whichever
    comes first. Everything else is the Work's."""

    def __init__(self, work, finish):
        self._work = work
        self._finish = finish
        self._lock = threading.Lock()

    def _done(self):
        with self._lock:
            finish, self._finish = self._finish, None
        if finish is not None:
            finish()

    def wait(self, *args, **kwargs):
        try:
            return self._work.wait(*args, **kwargs)
        finally:
            self._done()

    def get_future(self):
        """The Work's future, chained so that its completion records the op (its value, or its
        error, is the Work's)."""

        def done(fut):
            self._done()
            return fut.value()

        return self._work.get_future().then(done)

    def __getattr__(self, name):
        return getattr(self._work, name)


class OpTimer:
    def __init__(self, session):
        self._session = session
        self._originals = {}
        self._nccl = {}  # group key -> its backend is NCCL (the NCCL shim times it)
        for name in TIMED:
            fn = getattr(dist, name, None)
            if fn is None:
                continue
            self._originals[name] = fn
            setattr(dist, name, self._wrap(name, fn))

    def uninstall(self):
        for name, fn in self._originals.items():
            setattr(dist, name, fn)
        self._originals = {}

    def _wrap(self, name, fn):
        kind, tensor_name, peer_name = TIMED[name]
        session = self._session
        nccl = self._nccl
        tensor_arg, peer_arg = _Arg(fn, tensor_name), _Arg(fn, peer_name)
        group_arg, async_arg = _Arg(fn, "group"), _Arg(fn, "async_op")

        def timed(*args, **kwargs):
            group = group_arg.get(args, kwargs)
            if group is dist.GroupMember.WORLD:
                group = None
            key = group_key(group)  # The world's too: an NCCL world is the NCCL shim's.
            skip = nccl.get(key)
            if skip is None:
                skip = nccl[key] = is_nccl(group)
            if skip:
                return fn(*args, **kwargs)
            nbytes = _nbytes(tensor_arg.get(args, kwargs))
            peer = peer_arg.get(args, kwargs)
            peer = -1 if peer is None else int(peer)
            start = monotonic_ns()
            result = fn(*args, **kwargs)

            def finish():
                # Never raises into the job: an op the package cannot attribute (a group this
                # rank is not in, which torch answers with a warning and no op) is not recorded.
                try:
                    cid = session.comm_id(group)
                except Exception as e:  # noqa: BLE001 (never into the job)
                    session.op_not_recorded(group, e)
                    return
                op = _shim.Op()
                op.comm_id = cid
                op.bytes = nbytes
                op.host_start_ns = start
                op.host_end_ns = monotonic_ns()
                op.iteration = -1
                op.op_kind = kind
                op.peer = peer
                session.record_op(op)

            if name in _ASYNC_ALWAYS or async_arg.get(args, kwargs):
                return TimedWork(result, finish) if result is not None else result
            finish()
            return result

        timed.__wrapped__ = fn
        timed.__name__ = name
        return timed
