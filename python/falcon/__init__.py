"""Falcon for PyTorch: puts a torch.distributed job under Falcon's detection and mitigation.

    import falcon
    fs = falcon.init(dp_size=D, pp_size=P, dp_index=d, pp_index=p, global_micro_batches=M)

See falcon.session for the per-iteration calls and docs/pytorch.md for the whole story.
"""

import logging
import os

from falcon import _shim
from falcon import env as _env
from falcon import layout as _layout
from falcon.layout import Layout, LayerSplit, LayoutError, relaunch_layout, relaunch_split
from falcon.session import RESTART_EXIT_CODE, Session, comm_id_of

__all__ = ["init", "Session", "RESTART_EXIT_CODE", "comm_id_of", "relaunch_layout",
           "relaunch_split", "Layout", "LayerSplit", "LayoutError"]

MAX_BLOCK_STATE_BYTES = 2**50  # The hello's block_state_bytes bound (trainer_shim/shim_options.h).

log = logging.getLogger("falcon")


def _default_device(torch, dist, nccl_world, local_rank):
    """Where the validation GEMM runs by default: the CPU unless the world is NCCL's on CUDA; then
    the device the default group is bound to (init_process_group(device_id=...)), else the
    current device, unless that is device 0 while this is local rank r > 0 of a node with more
    than r GPUs (the script sets its device after falcon.init): cuda:r."""
    if not nccl_world or not torch.cuda.is_available():
        return torch.device("cpu")
    try:
        bound = dist.distributed_c10d._get_default_group().bound_device_id
    except (AttributeError, RuntimeError):
        bound = None  # torch before 2.3, or no default group.
    if bound is not None:
        return torch.device(bound)
    current = torch.cuda.current_device()
    if current == 0 and 0 < local_rank < torch.cuda.device_count():
        log.info("falcon: rank's current CUDA device is 0 while its local rank is %d: the "
                 "validation GEMM runs on cuda:%d (falcon.init(device=...) to choose)",
                 local_rank, local_rank)
        return torch.device("cuda", local_rank)
    return torch.device("cuda", current)


def init(*, dp_size=1, pp_size=1, tp_size=1, dp_index=0, pp_index=0, tp_index=0,
         global_micro_batches=1, pipeline_blocks=0, block_state_bytes=0, checkpoint_fn=None,
         time_ops=True, validation_group=True, device=None, environment=None, library=None,
         required=False):
    """Starts this process's session. torch.distributed must be initialized (the world group is
    registered as the WORLD communicator; with validation_group=True a new group of every rank is
    made for validation link passes and for agreeing on the controller's directives at each step
    boundary (falcon.agreement: one small all_gather per step), so every rank must call init, as
    with dist.new_group, and every rank must run the same steps. validation_group=False: no link
    passes, and each rank applies directives as its shim delivers them).

    Layout: this rank's (dp, pp, tp) indices and the sizes; global_micro_batches M is what S2
    splits across the DP groups (M >= dp_size). The model's pipeline shape, for S2L (moving
    layers between a slow stage and its pipeline peers): pipeline_blocks, its blocks between the
    embedding and the head (0 unknown, else [pp_size, 4096]), and block_state_bytes, what one
    block's training state weighs (parameters and optimizer state, in bytes; 0 unknown, at most
    2^50). An S2L layer split is applied live by the function given to Session.on_layer_split,
    else at a relaunch like S3 (falcon.relaunch_split(), docs/pytorch.md). checkpoint_fn(dir, iteration, excluded_ranks):
    writes the checkpoint on an S4 directive, after which the process exits with
    RESTART_EXIT_CODE (under falcon.launch, the job is relaunched without the excluded nodes);
    on an S3 directive it is called with no excluded ranks and the job is relaunched on the same
    nodes in the new layout: after such a relaunch (FALCON_LAYOUT set) the layout arguments must
    be this rank's place in falcon.relaunch_layout(). time_ops=False when another timer (the NCCL
    shim) times every op.

    GPUs: the validation GEMM runs on `device` (a torch.device or string; default, when the
    world group is NCCL's: the device it is bound to, else this process's current CUDA device,
    else the CPU; see _default_device), timed with CUDA events there. Link passes always run on a Gloo group over the host network (CPU tensors), also in an
    NCCL job: see docs/pytorch.md#gpu-jobs. With the NCCL interposer (LD_PRELOAD), call init
    before the job's first collective.

    Errors: ValueError naming the argument or environment variable that is wrong. When the shim
    library cannot be loaded the session runs untimed with a warning (training never stops for
    Falcon), unless required=True (OSError then).
    """
    import torch.distributed as dist

    penv = _env.from_environment(environment)
    for name, v in (("dp_size", dp_size), ("pp_size", pp_size), ("tp_size", tp_size)):
        if not isinstance(v, int) or not 1 <= v <= _env.MAX_U32:
            raise ValueError(f"falcon.init: {name}={v!r} must be an integer in [1, "
                             f"{_env.MAX_U32}]")
    for name, v, size in (("dp_index", dp_index, dp_size), ("pp_index", pp_index, pp_size),
                          ("tp_index", tp_index, tp_size)):
        if not isinstance(v, int) or not 0 <= v < size:
            raise ValueError(f"falcon.init: {name}={v!r} is not in [0, {size})")
    if dp_size * pp_size * tp_size != penv.world_size:
        raise ValueError(f"falcon.init: dp_size x pp_size x tp_size = "
                         f"{dp_size * pp_size * tp_size} is not the world size {penv.world_size}")
    if (not isinstance(global_micro_batches, int) or
            not dp_size <= global_micro_batches <= _env.MAX_U32):
        raise ValueError(f"falcon.init: global_micro_batches={global_micro_batches!r} must be an "
                         f"integer in [dp_size ({dp_size}), {_env.MAX_U32}]")
    if (not isinstance(pipeline_blocks, int) or isinstance(pipeline_blocks, bool) or
            not (pipeline_blocks == 0 or pp_size <= pipeline_blocks <= _layout.MAX_BLOCKS)):
        raise ValueError(f"falcon.init: pipeline_blocks={pipeline_blocks!r} must be 0 (unknown) "
                         f"or an integer in [pp_size ({pp_size}), {_layout.MAX_BLOCKS}]")
    if (not isinstance(block_state_bytes, int) or isinstance(block_state_bytes, bool) or
            not 0 <= block_state_bytes <= MAX_BLOCK_STATE_BYTES):
        raise ValueError(f"falcon.init: block_state_bytes={block_state_bytes!r} must be an "
                         "integer in [0, 2^50] (0: unknown)")
    try:
        relaunch = _layout.relaunch_layout(environment)
        split = _layout.relaunch_split(environment)
    except _layout.LayoutError as e:
        raise ValueError(f"falcon.init: {e}") from None
    if split is None and relaunch is not None and relaunch.stage_blocks:
        split = _layout.LayerSplit(relaunch.stage_blocks, relaunch.micro_batches,
                                   relaunch.plan_version)
    if split is not None:
        if (split.dp_size, split.pp_size) != (dp_size, pp_size):
            raise ValueError(f"falcon.init: the S2L layer split (FALCON_LAYER_SPLIT or "
                             f"FALCON_LAYOUT) is for DP {split.dp_size} x PP {split.pp_size}, but "
                             f"init got DP {dp_size} x PP {pp_size}")
        if pipeline_blocks and split.blocks != pipeline_blocks:
            raise ValueError(f"falcon.init: the S2L layer split's pipelines hold {split.blocks} "
                             f"blocks, but pipeline_blocks={pipeline_blocks}")
        if split.micro_batches and sum(split.micro_batches) != global_micro_batches:
            raise ValueError(f"falcon.init: the S2L layer split's micro-batch plan "
                             f"{list(split.micro_batches)} sums to {sum(split.micro_batches)}, "
                             f"not global_micro_batches={global_micro_batches}")
    if relaunch is not None:
        given = (dp_size, pp_size, tp_size, (dp_index, pp_index, tp_index))
        wanted = (relaunch.dp_size, relaunch.pp_size, relaunch.tp_size,
                  relaunch.position(penv.rank))
        if given != wanted:
            raise ValueError(
                f"falcon.init: rank {penv.rank} was relaunched in the S3 layout of FALCON_LAYOUT "
                f"(DP {wanted[0]} x PP {wanted[1]} x TP {wanted[2]}, this rank at dp/pp/tp "
                f"{list(wanted[3])}), but init got DP {dp_size} x PP {pp_size} x TP {tp_size} "
                f"at {[dp_index, pp_index, tp_index]}: build the process groups from "
                "falcon.relaunch_layout()")
        if relaunch.micro_batches and sum(relaunch.micro_batches) != global_micro_batches:
            raise ValueError(
                f"falcon.init: the S3 layout's micro-batch plan {list(relaunch.micro_batches)} "
                f"(FALCON_LAYOUT) sums to {sum(relaunch.micro_batches)}, not "
                f"global_micro_batches={global_micro_batches}")
    if not dist.is_initialized():
        raise ValueError("falcon.init: torch.distributed is not initialized "
                         "(call dist.init_process_group first)")
    if dist.get_rank() != penv.rank or dist.get_world_size() != penv.world_size:
        raise ValueError(f"falcon.init: torch.distributed says rank {dist.get_rank()} of "
                         f"{dist.get_world_size()}, the environment rank {penv.rank} of "
                         f"{penv.world_size}")
    import torch

    nccl_world = "nccl" in str(dist.get_backend())  # "nccl", or "cpu:gloo,cuda:nccl".
    if device is None:
        device = _default_device(torch, dist, nccl_world, penv.local_rank)
    try:
        device = torch.device(device)
    except (RuntimeError, TypeError) as e:
        raise ValueError(f"falcon.init: device={device!r} is not a torch device: {e}") from None
    if device.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if device.index is not None and not 0 <= device.index < count or count == 0:
            raise ValueError(f"falcon.init: device={str(device)!r}: this process sees "
                             f"{count} CUDA device(s)")
    shim = None
    try:
        shim = _shim.Shim(_shim.load(library))
    except (OSError, RuntimeError) as e:
        if required:
            raise
        log.warning("%s; training goes on without Falcon", e)
    if shim is not None:
        o = shim.default_options()
        o.node = penv.node.encode()
        o.local_rank = penv.local_rank
        o.dp_index, o.pp_index, o.tp_index = dp_index, pp_index, tp_index
        o.dp_size, o.pp_size, o.tp_size = dp_size, pp_size, tp_size
        o.global_micro_batches = global_micro_batches
        o.pipeline_blocks = pipeline_blocks
        o.block_state_bytes = block_state_bytes
        o.epoch = penv.epoch
        o.profiling = 1 if penv.profiling else 0
        # Directives are agreed across ranks at each step boundary over the validation group.
        o.agreed_directives = 1 if validation_group else 0
        if device.type == "cuda":
            o.gpu = device.index if device.index is not None else torch.cuda.current_device()
        try:
            shim.init(penv.job, penv.rank, penv.world_size, penv.agent_socket, o)
        except _shim.ShimError as e:
            if e.status == _shim.FAILED_PRECONDITION:
                if "libfalcon_nccl" in os.environ.get("LD_PRELOAD", ""):
                    raise RuntimeError(
                        "falcon.init: the NCCL interposer (LD_PRELOAD libfalcon_nccl.so) already "
                        "started this process's session at its first NCCL op, without the "
                        "job's layout: call falcon.init before the first collective (after "
                        f"dist.init_process_group, before DDP or any op): {e.reason}") from None
                raise RuntimeError("falcon.init: this process already has a session (call "
                                   f"close() on it first): {e.reason}") from None
            if e.status == _shim.INVALID_ARGUMENT:
                raise ValueError(f"falcon.init: {e.reason} (job {penv.job!r}, from FALCON_JOB, "
                                 "torchrun's --rdzv_id or SLURM_JOB_ID)") from None
            raise
        path = penv.agent_socket.removeprefix("unix:")
        if not path.startswith("@") and not os.path.exists(path):
            # Nothing says so otherwise: the shim attaches whenever an agent appears.
            log.warning("no node agent listens at %s (FALCON_AGENT_SOCKET) yet: training goes "
                        "on, and rank %d's timings are buffered in the shim (bounded) until one does",
                        path, penv.rank)
    # Link passes move CPU tensors: an NCCL world's validation group is a Gloo one.
    vgroup = (dist.new_group(list(range(penv.world_size)), backend="gloo" if nccl_world else None)
              if validation_group else None)
    s = Session(penv, shim, dp_size=dp_size, pp_size=pp_size, tp_size=tp_size,
                dp_index=dp_index, pp_index=pp_index, tp_index=tp_index,
                global_micro_batches=global_micro_batches, checkpoint_fn=checkpoint_fn,
                time_ops=time_ops, validation_group=vgroup, layout=relaunch, device=device,
                agreement=bool(validation_group), pipeline_blocks=pipeline_blocks, split=split)
    s.register_group(None, "world", name="world")
    return s
