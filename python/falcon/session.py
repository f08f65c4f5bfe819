"""A Falcon session for one torch.distributed process (one rank).

    import falcon
    fs = falcon.init(dp_size=2, pp_size=2, dp_index=dp, pp_index=pp, global_micro_batches=8)
    fs.register_group(dp_comm, "dp")           # and "pp" / "tp" groups; the world is registered
    for i in range(steps):
        with fs.step(i) as step:               # polls Falcon's directives at the boundary
            for _ in range(fs.micro_batches()):  # this DP group's count now (S2)
                loss = model(x) * fs.loss_scale()  # 1 / global micro-batches
                loss.backward()
            for p in params: dist.all_reduce(p.grad, group=dp_comm)  # SUM: the global mean
            step.loss = loss.item()
    fs.close()

What it does (docs/pytorch.md): registers the job's process groups as communicators with their
members and roles; times every torch.distributed collective and point-to-point op (async Work
objects until their wait()) and marks iteration boundaries; applies S2 micro-batch plans at the
iteration the controller set (every rank the same); runs the controller's validation (GEMM with
torch.matmul, link passes with send/recv on a group of its own) while the job is paused; on S4
calls the user's checkpoint callback, leaves the restart request for falcon.launch (local rank 0,
at FALCON_RESTART_FILE) and exits with RESTART_EXIT_CODE for the launcher to relaunch; S3 (a new
layout) the same way, at a relaunch of every node in the new layout (falcon.layout), not live;
S2L (a layer split: blocks moved between a pipeline's stages, with a new micro-batch plan) live
through the function given to on_layer_split (the ranks then agree on its outcome: a split that
failed on any rank stops the job), else at a relaunch in place with the new split
(falcon.relaunch_split()), like S3. A plan directive (S2, S2L, S3) whose plan version is not newer
than the plan in force (a relaunched job given again the directive it was relaunched for) is
acknowledged as applied and not acted on.
An absent agent never stops training: the shim buffers and reconnects.
"""

import ctypes
import dataclasses
import hashlib
import logging
import sys
import threading

from falcon import _shim
from falcon import agreement
from falcon import jsonfile
from falcon import layout as layout_mod
from falcon import ops as ops_mod
from falcon import validation

log = logging.getLogger("falcon")

# Exit code after an S4 checkpoint: the job asks its launcher for a relaunch (falcon.launch, or a
# Slurm requeue). EX_TEMPFAIL from sysexits.h.
RESTART_EXIT_CODE = 75


def write_restart_request(path, request):
    """Writes the restart request (JSON: checkpoint_dir, excluded_ranks, iteration, epoch, as the
    reference trainer's launcher reads it; for S3 also "layout", falcon.layout's JSON form, for
    S2L "layer_split", falcon.layout.LayerSplit's, both with no excluded ranks) to `path`
    atomically (a temporary file, then rename). OSError when it cannot."""
    jsonfile.write(path, request)

ROLES = {"dp": _shim.COMM_DP, "pp": _shim.COMM_PP, "tp": _shim.COMM_TP,
         "world": _shim.COMM_WORLD, "unknown": _shim.COMM_UNKNOWN}


def comm_id_of(job, role, members):
    """Communicator id: the same on every member (a hash of job, role and sorted global ranks),
    never 0."""
    key = f"{job}/{role}/{','.join(str(r) for r in sorted(members))}".encode()
    cid = int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "little")
    return cid or 1


class _Step:
    def __init__(self, session, iteration):
        self._s = session
        self.iteration = iteration
        self.loss = 0.0
        self.start_ns = 0

    def __enter__(self):
        self._s._begin(self)
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self._s._end(self)
        return False


class Session:
    """See the module doc. Build with falcon.init(); one per process."""

    def __init__(self, penv, shim, *, dp_size, pp_size, tp_size, dp_index, pp_index, tp_index,
                 global_micro_batches, checkpoint_fn, time_ops, validation_group,
                 layout=None, device=None, agreement=True, pipeline_blocks=0, split=None):
        self.env = penv
        # Directives agreed across ranks at each boundary (falcon.agreement); needs the
        # validation group, over which the ranks exchange what they hold.
        self.agreement = agreement
        self._exchange = None  # The agreement's all_gather started at the last boundary.
        self._boundary = 0  # The iteration of the boundary being polled.
        self._rows = None  # Its receive buffers, reused (finished before the next starts).
        self._no_agreement_warned = False
        self.device = device  # Where the validation GEMM runs (None: the CPU).
        self._shim = shim
        self.dp_size, self.pp_size, self.tp_size = dp_size, pp_size, tp_size
        self.dp_index, self.pp_index, self.tp_index = dp_index, pp_index, tp_index
        self.global_micro_batches = global_micro_batches
        self._checkpoint_fn = checkpoint_fn
        self._plan = _even(global_micro_batches, dp_size)
        self._plan_version = 0
        self.pipeline_blocks = pipeline_blocks  # 0: unknown.
        self._split = None  # The S2L split in force, per DP group; None: every pipeline even.
        self._layer_split_fn = None  # on_layer_split's.
        self._split_failure = None  # Why a live split failed on some rank: the job stops.
        # The ranks agree on a live split's outcome over the validation group (untimed).
        self._all_reduce = validation.untimed("all_reduce")
        if layout is not None:  # An S3 relaunch: the directive's plan version and S2 plan go on.
            self._plan_version = layout.plan_version
            if layout.micro_batches:
                self._plan = list(layout.micro_batches)
        if split is not None:  # An S2L relaunch (or an S3 one under a split): its split and plan.
            self._split = _uneven_or_none(split.stage_blocks)
            if split.micro_batches:
                self._plan = list(split.micro_batches)
            self._plan_version = max(self._plan_version, split.plan_version)
        self._restart = None
        self._groups = {}  # id(ProcessGroup or None) -> comm id
        self._unattributed = set()  # group keys whose ops could not be recorded (logged once)
        self._lock = threading.Lock()
        self._closed = False
        self.validation_group = validation_group
        # Callbacks must outlive every C call that may use them.
        self._paused = False
        self._meeting = None  # validation.Rendezvous, made at the first link pass.
        self._no_store = False
        self._directive_cb = _shim.DirectiveFn(self._on_directive)
        self._validation_cb = _shim.ValidationFn(self._on_validation)
        self._pause_cb = _shim.PauseFn(self._on_pause)
        self._ops = ops_mod.OpTimer(self) if time_ops else None
        if shim is not None:
            shim.set_validation_executor(self._validation_cb)
            shim.set_pause_handler(self._pause_cb)

    # --- communicators -------------------------------------------------------------------
    def register_group(self, group, role, name=None, members=None):
        """Registers a process group as a communicator of `role` ("dp", "pp", "tp", "world",
        "unknown"). `members`: its global ranks (default: read from the group). Returns the comm
        id. ValueError on an unknown role or a group this rank is not in."""
        if role not in ROLES:
            raise ValueError(f"falcon: role {role!r} is not one of {sorted(ROLES)}")
        if members is None:
            try:
                members = ops_mod.group_ranks(group)
            except Exception as e:  # noqa: BLE001 (torch raises several kinds for a non-group)
                raise ValueError(f"falcon: {group!r} is not a process group this rank is in "
                                 f"({type(e).__name__}: {e})") from None
        members = list(members)
        world = self.env.world_size
        for m in members:
            if not isinstance(m, int) or isinstance(m, bool) or not 0 <= m < world:
                raise ValueError(f"falcon: member {m!r} of the {role} group is not a rank in "
                                 f"[0, {world})")
        if len(set(members)) != len(members):
            raise ValueError(f"falcon: the {role} group's members {members} repeat a rank")
        if self.env.rank not in members:
            raise ValueError(f"falcon: rank {self.env.rank} is not a member of the {role} group "
                             f"{members}")
        if self._closed:
            raise RuntimeError("falcon: the session is closed (close() was called)")
        cid = comm_id_of(self.env.job, role, members)
        with self._lock:
            self._groups[ops_mod.group_key(group)] = cid
        if self._shim is not None:
            self._shim.register_comm(cid, ROLES[role], members, name or f"{role}{members}")
        return cid

    def comm_id(self, group):
        """The comm id of `group` (None: the world), registering an unknown group on first use."""
        key = ops_mod.group_key(group)
        cid = self._groups.get(key)  # A dict read is atomic; registration takes the lock.
        if cid is None:
            cid = self.register_group(group, "unknown")
        return cid

    def time_ddp(self, model, role="dp"):
        """Times a DistributedDataParallel model's gradient all-reduces, which DDP runs in C++
        where the op wrappers cannot see them: registers torch's own default communication hook
        (each bucket divided by the group's size and all-reduced, what DDP does without a hook)
        on the model's own process group (model.process_group: the world, or the group given to
        DDP), through the timed dist.all_reduce: one op per bucket, ended when the bucket's
        future completes. The group is registered as a communicator of `role` unless it already
        is. Call it once, before the first backward (torch allows one hook per model). A model
        with its own hook needs nothing: a hook that calls
        dist.all_reduce(..., async_op=True).get_future() is timed as it is.
        Returns True when the hook was registered; False when the package does not time ops
        (time_ops=False, or the group is NCCL's: the LD_PRELOAD shim times it). ValueError when
        `model` is not a DistributedDataParallel or `role` is unknown."""
        from torch.nn.parallel import DistributedDataParallel
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

        if not isinstance(model, DistributedDataParallel):
            raise ValueError(f"falcon: time_ddp: {type(model).__name__} is not a "
                             "DistributedDataParallel model")
        if role not in ROLES:
            raise ValueError(f"falcon: role {role!r} is not one of {sorted(ROLES)}")
        if self._closed:
            raise RuntimeError("falcon: the session is closed (close() was called)")
        group = model.process_group
        if self._ops is None or ops_mod.is_nccl(group):
            return False
        if ops_mod.group_key(group) not in self._groups:
            self.register_group(group, role)
        model.register_comm_hook(group, default_hooks.allreduce_hook)
        return True

    def op_not_recorded(self, group, error):
        """An op the package could not attribute to a communicator: logged once per group, the
        op is not recorded, the job goes on."""
        key = ops_mod.group_key(group)
        if key not in self._unattributed:
            self._unattributed.add(key)
            log.warning("falcon: ops on %r are not recorded: %s", group, error)

    # --- iterations and S2 ---------------------------------------------------------------
    def step(self, iteration):
        """Context manager around one training iteration (iteration: an int in [0, 2^62]); set
        `.loss` inside. ValueError naming a bad iteration; RuntimeError after close()."""
        if self._closed:
            raise RuntimeError("falcon: the session is closed (close() was called)")
        if not isinstance(iteration, int) or isinstance(iteration, bool) or \
                not 0 <= iteration <= 2**62:
            raise ValueError(f"falcon: step iteration {iteration!r} is not an int in [0, 2^62]")
        return _Step(self, iteration)

    def micro_batches(self):
        """Micro-batches this rank's DP group runs in the current iteration."""
        return self._plan[self.dp_index]

    def plan(self):
        """The micro-batch plan in force: one count per DP index, summing to the global count."""
        return list(self._plan)

    def layer_split(self):
        """The S2L layer split in force: per DP index, the blocks each stage of that pipeline
        holds; None while every pipeline is split evenly (falcon.layout.even_stage_blocks, the
        controller's rule: no S2L directive applied, or a split reverted to even)."""
        return [list(b) for b in self._split] if self._split is not None else None

    def stage_blocks(self):
        """The blocks each stage of this rank's pipeline holds under the split in force; None
        when it is the even split."""
        return list(self._split[self.dp_index]) if self._split is not None else None

    def on_layer_split(self, fn):
        """Applies S2L layer splits live: at the boundary the controller set, every rank calls
        fn(stage_blocks, micro_batches) (stage_blocks: per DP index, the blocks each stage holds;
        micro_batches: the plan that goes with it, per DP index), which moves the layers (each
        rank of a pipeline gets its new blocks' parameters and optimizer state from the stage
        that held them) and returns. The ranks then agree on the outcome (one all_reduce of a
        flag per rank on the validation group): the split is in force only when fn returned on
        every rank. An exception on any rank cannot be refused there alone (its peers may have
        moved layers already, so the ranks' models no longer agree): every rank acks the
        directive as rejected, naming the ranks it failed on, and the step() at that boundary
        raises RuntimeError on every rank, which stops the job (resume it from its last checkpoint).
        fn should therefore check what it can before moving anything, on every rank alike. With
        more than one rank it needs the validation group (falcon.init(validation_group=True)):
        without one a layer split is refused. Without fn a layer split is applied at a relaunch
        (a checkpoint, then falcon.relaunch_split() in the relaunched job), which needs
        checkpoint_fn and falcon.launch. fn=None removes it."""
        if fn is not None and not callable(fn):
            raise ValueError(f"falcon: on_layer_split: {fn!r} is not callable")
        self._layer_split_fn = fn

    def loss_scale(self):
        """Factor for each micro-batch's mean loss: 1 / global micro-batches. Gradients summed
        over the DP communicator (all_reduce SUM) are then the global batch's mean whatever the
        split (docs/pytorch.md#s2-micro-batches-per-dp-group)."""
        return 1.0 / self.global_micro_batches

    def _begin(self, step):
        self._boundary = step.iteration
        agreed = self._agreed(step.iteration) if self.agreement else None
        if self._shim is not None:
            try:
                if self.agreement:
                    self._shim.poll_agreed(step.iteration, agreed, self._directive_cb)
                else:
                    self._shim.poll_directives(step.iteration, self._directive_cb)
            except _shim.ShimError as e:
                log.warning("falcon: directive poll at iteration %d failed: %s", step.iteration, e)
            if self._split_failure is not None:
                self._stop_after_failed_split()
            if self._restart is not None:
                self._exit_for_restart()
        if self.agreement:
            self._start_exchange(step.iteration)
        step.start_ns = self.now_ns()

    def _held(self, iteration):
        """This rank's row for the agreement: the job-wide directives its shim holds (None when
        it has no shim library)."""
        if self._shim is None:
            return agreement.encode(None)
        try:
            pending, _ = self._shim.pending_directives(agreement.MAX_PENDING)
        except _shim.ShimError as e:
            log.warning("falcon: pending directives at iteration %d: %s", iteration, e)
            pending = []
        return agreement.encode(pending)

    def _start_exchange(self, iteration):
        """Starts the exchange the next boundary agrees on (falcon.agreement): an async all_gather
        on the validation group, on every rank, that runs during this iteration, so the next
        boundary does not wait for it. A failure is raised: the ranks' exchanges would no longer
        pair up."""
        if self.env.world_size == 1:
            return
        try:
            self._exchange = agreement.start(self._held(iteration), self.validation_group,
                                             self.env.world_size,
                                             validation.untimed("all_gather"), self._rows)
        except RuntimeError as e:
            raise RuntimeError(f"falcon: the directive agreement could not start at iteration "
                               f"{iteration} on rank {self.env.rank}: {e}") from e
        self._rows = self._exchange[1]

    def _agreed(self, iteration):
        """The job-wide directives to apply at `iteration`: those every rank held at the previous
        boundary (the exchange started there), due by now; [] at the first boundary. When a
        rank runs without the shim library, what this rank holds and is due (as without
        agreement; warned once). A failed exchange is raised (see _start_exchange)."""
        if self.env.world_size == 1:
            return agreement.agree([self._held(iteration)], iteration) or []
        exchange, self._exchange = self._exchange, None
        if exchange is None:
            return []
        try:
            rows = agreement.finish(exchange)
        except RuntimeError as e:
            raise RuntimeError(f"falcon: the directive agreement failed at iteration {iteration} "
                               f"on rank {self.env.rank}: {e}") from e
        try:
            agreed = agreement.agree(rows, iteration)
        except ValueError as e:  # The same rows on every rank: every rank skips alike.
            log.warning("falcon: directive agreement at iteration %d: %s: no directive applied "
                        "there", iteration, e)
            return []
        if agreed is None:
            if not self._no_agreement_warned:
                self._no_agreement_warned = True
                log.warning("falcon: a rank runs without the shim library: directives are not "
                            "agreed across ranks; each rank applies what it holds when due")
            own = agreement.agree([self._held(iteration)], iteration)
            return own or []
        return agreed

    def _end(self, step):
        end = self.now_ns()
        if self._shim is None:
            return
        try:
            self._shim.iteration(step.iteration, step.start_ns, end, float(step.loss),
                                 self._plan_version)
        except _shim.ShimError as e:
            log.warning("falcon: iteration %d not recorded: %s", step.iteration, e)

    def now_ns(self):
        """CLOCK_MONOTONIC ns: the shim's clock (falcon_shim_now_ns), read without a C call."""
        return ops_mod.monotonic_ns()

    def record_op(self, op):
        if self._shim is not None:
            self._shim.record_op(op)

    # --- directives ----------------------------------------------------------------------
    def _on_directive(self, _user, dptr, reason, capacity):
        try:
            why = self._apply(dptr.contents)
        except Exception as e:  # A callback must not raise into C.
            why = f"falcon package error: {e!r}"
        if why is None:
            return 0
        _write_c_string(reason, capacity, why)
        log.warning("falcon: directive rejected: %s", why)
        return 1

    def _apply(self, d):
        if d.kind in _PLAN_KINDS and 0 < d.plan_version <= self._plan_version:
            # In force already: a relaunched job given again the directive it was relaunched for
            # (its ack lost at the exit; a layer split does not bump the epoch). Acting on it
            # again would relaunch again.
            log.info("falcon: directive %d (plan version %d) is in force already (plan version "
                     "%d): acknowledged, not applied again", d.directive_id, d.plan_version,
                     self._plan_version)
            return None
        if self._restart is not None:
            # The job is about to exit for a relaunch that carries what was decided before this
            # directive: applying it would be acknowledged and lost.
            kind = _restart_kind(self._restart)
            return (f"the job is exiting for a relaunch ({kind} at iteration "
                    f"{self._restart['iteration']}): a later directive is not applied")
        if d.kind == _shim.DIRECTIVE_MICRO_BATCH_PLAN:
            plan = [d.micro_batches[i] for i in range(d.micro_batches_len)]
            if len(plan) != self.dp_size:
                return f"micro_batches: {len(plan)} counts for {self.dp_size} DP groups"
            if sum(plan) != self.global_micro_batches:
                return (f"micro_batches: sum {sum(plan)} is not the global "
                        f"{self.global_micro_batches}")
            if min(plan) < 1:
                return "micro_batches: a DP group would run none"
            self._plan = plan
            self._plan_version = d.plan_version
            log.info("falcon: micro-batch plan %s (version %d) from iteration %d", plan,
                     d.plan_version, self._boundary)
            return None
        if d.kind == _shim.DIRECTIVE_LAYER_SPLIT:
            return self._apply_layer_split(d)
        if d.kind in (_shim.DIRECTIVE_CHECKPOINT_RESTART, _shim.DIRECTIVE_TOPOLOGY_CHANGE) and \
                d.epoch > layout_mod.MAX_EPOCH:
            return (f"epoch {d.epoch} is above {layout_mod.MAX_EPOCH}: the relaunched job could "
                    "not register at it (FALCON_EPOCH)")
        if d.kind == _shim.DIRECTIVE_CHECKPOINT_RESTART:
            if self._checkpoint_fn is None:
                return "checkpoint_restart: no checkpoint callback (falcon.init(checkpoint_fn=))"
            excluded = [d.excluded_ranks[i] for i in range(d.excluded_ranks_len)]
            ckpt_dir = (d.checkpoint_dir or b"").decode()
            # The boundary it is applied at (its effective iteration, or a later one when a rank
            # got it late): the job resumes there, and no step runs twice.
            self._checkpoint_fn(ckpt_dir, self._boundary, excluded)
            self._restart = {"checkpoint_dir": ckpt_dir, "excluded_ranks": excluded,
                             "iteration": self._boundary,
                             "epoch": int(d.epoch)}
            return None
        if d.kind == _shim.DIRECTIVE_TOPOLOGY_CHANGE:
            return self._apply_topology_change(d)
        return f"directive kind {d.kind}: unknown to the PyTorch package"

    def _apply_topology_change(self, d):
        """S3 at a relaunch: the PyTorch package does not move ranks inside a running job (its
        process groups and the stages' parameters are the script's). It checkpoints, as for S4,
        and leaves the new layout in the restart request: falcon.launch relaunches every node
        with it (FALCON_LAYOUT) at the directive's epoch."""
        if self._checkpoint_fn is None:
            return ("topology_change: no checkpoint callback (falcon.init(checkpoint_fn=)): the "
                    "PyTorch package applies a new layout at a relaunch, from a checkpoint")
        if not self.env.restart_file:
            return ("topology_change: FALCON_RESTART_FILE is unset (the job was not started by "
                    "falcon.launch): the PyTorch package applies a new layout at a relaunch, "
                    "which only falcon.launch does")
        assignments = [(a.rank, a.dp_index, a.pp_index, a.tp_index)
                       for a in (d.assignments[i] for i in range(d.assignments_len))]
        try:
            new = layout_mod.from_assignments(assignments, self.env.world_size,
                                              plan_version=max(int(d.plan_version), 0))
        except layout_mod.LayoutError as e:
            return str(e)
        sizes = (self.dp_size, self.pp_size, self.tp_size)
        if (new.dp_size, new.pp_size, new.tp_size) != sizes:
            # The controller's S3 moves ranks; a script's stages and checkpoints have their sizes.
            return (f"topology_change: the layout is DP {new.dp_size} x PP {new.pp_size} x TP "
                    f"{new.tp_size}, the job runs DP {sizes[0]} x PP {sizes[1]} x TP {sizes[2]}: "
                    "the PyTorch package relaunches in a layout of the same sizes")
        # The S2 plan and the S2L split in force go on (as the reference trainer's do).
        new = dataclasses.replace(new, micro_batches=tuple(self._plan),
                                  stage_blocks=tuple(tuple(b) for b in self._split or ()))
        iteration = self._boundary  # Where it is applied (see the S4 case).
        self._checkpoint_fn("", iteration, [])
        self._restart = {"checkpoint_dir": "", "excluded_ranks": [], "iteration": iteration,
                         "epoch": int(d.epoch), "layout": new.to_json()}
        return None

    def _apply_layer_split(self, d):
        """S2L: the split checked against the job, then applied live (on_layer_split's function)
        or, without one, at a relaunch in place like S3: a checkpoint, and the split in the
        restart request for falcon.launch (FALCON_LAYER_SPLIT in the relaunched job)."""
        # The struct has the split's fields: _shim.load refuses libraries older than ABI 4.
        dp, pp = d.micro_batches_len, d.pp_stages
        if dp != self.dp_size or pp != self.pp_size:
            return (f"layer_split: a split of DP {dp} x PP {pp}, the job runs DP {self.dp_size} "
                    f"x PP {self.pp_size}")
        if d.stage_blocks_len != dp * pp:
            return f"layer_split: {d.stage_blocks_len} stage counts for DP {dp} x PP {pp}"
        flat = [d.stage_blocks[i] for i in range(d.stage_blocks_len)]
        plan = [d.micro_batches[i] for i in range(dp)]
        try:
            split = layout_mod.layer_split([flat[i * pp:(i + 1) * pp] for i in range(dp)], plan,
                                           max(int(d.plan_version), 0), "layer_split",
                                           self.pipeline_blocks)
        except layout_mod.LayoutError as e:
            return str(e)
        if sum(plan) != self.global_micro_batches:
            return (f"layer_split: micro_batches sum to {sum(plan)}, not the global "
                    f"{self.global_micro_batches}")
        stage_blocks = [list(b) for b in split.stage_blocks]
        if self._layer_split_fn is not None:
            return self._apply_layer_split_live(d, stage_blocks, plan)
        if self._checkpoint_fn is None:
            return ("layer_split: no live applier (Session.on_layer_split) and no checkpoint "
                    "callback (falcon.init(checkpoint_fn=)) to apply it at a relaunch")
        if not self.env.restart_file:
            return ("layer_split: no live applier (Session.on_layer_split), and "
                    "FALCON_RESTART_FILE is unset (the job was not started by falcon.launch): "
                    "without one the PyTorch package applies a split at a relaunch, which only "
                    "falcon.launch does")
        if d.epoch > layout_mod.MAX_EPOCH:
            return (f"epoch {d.epoch} is above {layout_mod.MAX_EPOCH}: the relaunched job could "
                    "not register at it (FALCON_EPOCH)")
        iteration = self._boundary  # Where it is applied (see the S4 case).
        self._checkpoint_fn("", iteration, [])
        self._restart = {"checkpoint_dir": "", "excluded_ranks": [], "iteration": iteration,
                         "epoch": int(d.epoch), "layer_split": split.to_json()}
        return None

    def _apply_layer_split_live(self, d, stage_blocks, plan):
        """on_layer_split's function, then the ranks' agreement on its outcome: the split is in
        force when it returned on every rank; else the job stops (on_layer_split)."""
        world = self.env.world_size
        if world > 1 and (self.validation_group is None or not self.agreement):
            return ("layer_split: applying a split live needs the ranks to agree on its outcome "
                    "over the package's validation group, which this job has not "
                    "(falcon.init(validation_group=False))")
        error = unknown = None
        try:
            self._layer_split_fn([list(b) for b in stage_blocks], list(plan))
        except Exception as e:  # noqa: BLE001 (the user's function: any failure counts)
            error = str(e) or type(e).__name__
        try:
            failed = self._failed_ranks(error is not None)
        except Exception as e:  # noqa: BLE001 (a dead peer: the outcome is unknown)
            failed = None
            unknown = f"the ranks could not agree on its outcome ({e})"
        if failed == []:
            self._split, self._plan = _uneven_or_none(stage_blocks), plan
            self._plan_version = d.plan_version
            log.info("falcon: layer split %s, micro-batch plan %s (version %d) from iteration %d",
                     stage_blocks, plan, d.plan_version, self._boundary)
            return None
        where = unknown if failed is None else f"it failed on rank(s) {failed} of {world}"
        self._split_failure = (
            f"layer_split applied live at iteration {self._boundary}: {where}"
            f"{f' (here: {error})' if error is not None else ''}; ranks that moved layers "
            "cannot move them back alone, so the ranks' models no longer agree: the job stops "
            "(resume it from its last checkpoint)")
        return self._split_failure

    def _failed_ranks(self, failed_here):
        """The ranks whose live split failed, ascending, the same on every rank: one all_reduce
        (sum) of a flag per rank on the validation group. Raises what the all_reduce raises."""
        if self.env.world_size == 1:
            return [self.env.rank] if failed_here else []
        import torch
        flags = torch.zeros(self.env.world_size, dtype=torch.int64)
        flags[self.env.rank] = 1 if failed_here else 0
        self._all_reduce(flags, group=self.validation_group)
        return [r for r, f in enumerate(flags.tolist()) if f]

    def _stop_after_failed_split(self):
        """A live layer split failed on some rank (its rejection is acked): flush the shim and
        raise on every rank."""
        why = self._split_failure
        log.error("falcon: %s", why)
        self.close()
        raise RuntimeError(f"falcon: {why}")

    def _exit_for_restart(self):
        request = self._restart
        kind = _restart_kind(request)
        if kind == "S2L":
            log.warning("falcon: S2L: checkpoint written; exiting with %d for a relaunch with the "
                        "layer split %s and micro-batch plan %s at epoch %d", RESTART_EXIT_CODE,
                        request["layer_split"]["stage_blocks"],
                        request["layer_split"]["micro_batches"], request["epoch"])
        elif kind == "S3":
            log.warning("falcon: S3: checkpoint written; exiting with %d for a relaunch as DP %d x "
                        "PP %d x TP %d (this rank at %s) at epoch %d", RESTART_EXIT_CODE,
                        request["layout"]["dp_size"], request["layout"]["pp_size"],
                        request["layout"]["tp_size"],
                        request["layout"]["positions"][self.env.rank], request["epoch"])
        else:
            log.warning("falcon: S4: checkpoint written to %r; exiting with %d for a relaunch "
                        "without ranks %s at epoch %d", request["checkpoint_dir"],
                        RESTART_EXIT_CODE, request["excluded_ranks"], request["epoch"])
        if self.env.restart_file and self.env.local_rank == 0:
            try:
                write_restart_request(self.env.restart_file, request)
            except OSError as e:
                log.error("falcon: %s: cannot write the restart request to %r (%s): the "
                          "launcher will not relaunch the job", kind, self.env.restart_file, e)
        # Every rank's checkpoint and request are written before any rank exits: torchrun stops
        # the others as soon as one exits non-zero.
        try:
            import torch.distributed as dist
            if dist.is_initialized():
                dist.barrier()
        except Exception as e:  # noqa: BLE001 (a dead peer: exit anyway, the request stands)
            log.error("falcon: %s: barrier before the exit failed: %s", kind, e)
        self.close()
        sys.exit(RESTART_EXIT_CODE)

    # --- validation ----------------------------------------------------------------------
    def _on_pause(self, _user, paused):
        """The shim holds this rank (paused=1) or lets it go (0); runs on the training thread."""
        self._paused = bool(paused)
        if not self._paused and self._meeting is not None:
            self._meeting.absent.clear()  # A new pause: every peer gets its chance again.

    def _rendezvous(self):
        """The link passes' Rendezvous over the job's c10d store; None (passes meet in Gloo
        directly, logged once) when torch.distributed has no default store."""
        if self._meeting is None and not self._no_store:
            try:
                import torch.distributed.distributed_c10d as c10d
                self._meeting = validation.Rendezvous(c10d._get_default_store(), self.env.job)
            except Exception as e:  # noqa: BLE001 (a private torch function: any failure)
                self._no_store = True
                log.warning("falcon: no c10d store for link-pass rendezvous (%s): a pass whose "
                            "peer is not paused waits for it", e)
        return self._meeting

    def _link_pass(self, t, r):
        """Runs link-pass task `t` into result `r`; None, or why it could not."""
        if not self._paused:
            # Its peers may be training: a send or recv here could wait for them while they wait
            # for this rank in a collective.
            return (f"link pass of task {t.task_id} not run: rank {self.env.rank} is not paused "
                    "(the pause reached it after its iteration began)")
        links = [(t.links[i].src_rank, t.links[i].dst_rank) for i in range(t.links_len)]
        timings, missed = validation.link_pass(
            links, t.link_bytes, t.repeats, self.env.rank, self.validation_group, self.now_ns,
            task_id=t.task_id, rendezvous=self._rendezvous())
        if missed:
            return f"link pass of task {t.task_id}: " + "; ".join(e for _, e in missed)
        for i, ((src, dst), ns) in enumerate(timings[: r.link_timings_capacity]):
            r.link_timings[i].link.src_rank = src
            r.link_timings[i].link.dst_rank = dst
            r.link_timings[i].duration_ns = ns
            r.link_timings[i].bytes = t.link_bytes
        r.link_timings_len = min(len(timings), r.link_timings_capacity)
        return None

    def _on_validation(self, _user, tptr, rptr):
        t, r = tptr.contents, rptr.contents
        try:
            if t.kind == _shim.VALIDATION_GEMM:
                dur, flops = validation.gemm(t.gemm_m, t.gemm_n, t.gemm_k, t.repeats, self.now_ns,
                                             device=self.device)
                r.gemm_duration_ns, r.gemm_flops = dur, flops
                return 0
            if t.kind == _shim.VALIDATION_LINK_PASS:
                why = self._link_pass(t, r)
                if why is None:
                    return 0
            else:
                why = f"validation task kind {t.kind}: unknown to the PyTorch package"
        except Exception as e:
            why = f"validation task {t.task_id}: {e!r}"
        _write_c_string(r.error, r.error_capacity, why)
        return 1

    # --- lifecycle -----------------------------------------------------------------------
    def stats(self):
        """The shim's counters (records accepted, acked, dropped, directives applied, ...)."""
        return self._shim.stats() if self._shim is not None else {}

    def close(self):
        """Restores torch.distributed's functions and flushes the shim (bounded). Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._ops is not None:
            self._ops.uninstall()
        exchange, self._exchange = self._exchange, None
        if exchange is not None:  # Every rank started one at its last boundary.
            try:
                agreement.finish(exchange)
            except RuntimeError as e:
                log.warning("falcon: the last directive agreement did not finish: %s", e)
        if self._shim is not None:
            try:
                self._shim.shutdown()
            except _shim.ShimError as e:
                log.warning("falcon: shutdown: %s", e)


# Directives that carry a plan (and its version): S2, S2L, S3.
_PLAN_KINDS = (_shim.DIRECTIVE_MICRO_BATCH_PLAN, _shim.DIRECTIVE_LAYER_SPLIT,
               _shim.DIRECTIVE_TOPOLOGY_CHANGE)


def _uneven_or_none(stage_blocks):
    """`stage_blocks` as lists, or None when every pipeline is split evenly (the controller's
    rule, falcon.layout.even_stage_blocks)."""
    if layout_mod.is_even_split(stage_blocks):
        return None
    return [list(b) for b in stage_blocks]


def _restart_kind(request):
    """The strategy a restart request carries out: "S2L", "S3" or "S4"."""
    if "layer_split" in request:
        return "S2L"
    return "S3" if "layout" in request else "S4"


def _write_c_string(dst, capacity, text):
    """Writes `text` NUL-terminated into the C buffer `dst` of `capacity` bytes, cut to fit."""
    if capacity < 1:
        return
    b = text.encode()[: capacity - 1] + b"\0"
    ctypes.memmove(dst, b, len(b))


def _even(total, parts):
    base, extra = divmod(total, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]
