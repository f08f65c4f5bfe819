"""Where this process sits, read from the launcher's environment (torchrun or Slurm).

Variables, first found wins:
  job:          FALCON_JOB; TORCHELASTIC_RUN_ID (torchrun --rdzv_id, unless "none"); SLURM_JOB_ID
                ("slurm-<id>").
  rank:         RANK (torchrun); SLURM_PROCID.
  world size:   WORLD_SIZE; SLURM_NTASKS.
  local rank:   LOCAL_RANK; SLURM_LOCALID; 0.
  node:         FALCON_NODE; SLURMD_NODENAME; the host name.
  agent socket: FALCON_AGENT_SOCKET; /run/falcon/agent.sock (the packaged agent's default).
  restart:      TORCHELASTIC_RESTART_COUNT; SLURM_RESTART_COUNT; 0.
  epoch:        FALCON_EPOCH (the job epoch after an S4 restart, set by falcon.launch); 0.
  restart file: FALCON_RESTART_FILE (where local rank 0 leaves the S4 or S3 restart request for
                falcon.launch); none.
  profiling:    FALCON_PROFILING (1/true/yes/on: time ops with device events from the start, as
                the NCCL interposer reads it; the agent turns it on and off later); off
                (0/false/no/off, unset or empty).
The layout of an S3 relaunch, FALCON_LAYOUT, is read by falcon.layout.relaunch_layout.
"""

import dataclasses
import os
import socket

DEFAULT_AGENT_SOCKET = "/run/falcon/agent.sock"
MAX_SOCKET_PATH_BYTES = 107  # sockaddr_un.sun_path less its NUL


class EnvError(ValueError):
    """A variable is missing or malformed; the message names it."""


@dataclasses.dataclass(frozen=True)
class ProcessEnv:
    job: str
    rank: int
    world_size: int
    local_rank: int
    node: str
    agent_socket: str
    restart_count: int
    epoch: int = 0
    restart_file: str = ""
    profiling: bool = False


def _first(env, names):
    for n in names:
        v = env.get(n)
        if v not in (None, ""):
            return n, v
    return None, None


# The largest value the shim's 32-bit fields (ranks, sizes, epoch as the controller keeps it)
# hold: ctypes would wrap a larger one without a word.
MAX_U32 = 2**32 - 1


def _int(env, names, default=None, minimum=0, maximum=MAX_U32):
    name, v = _first(env, names)
    if name is None:
        if default is None:
            raise EnvError(f"falcon: none of {', '.join(names)} is set (launch with torchrun or "
                           "srun, or set them)")
        return default
    try:
        i = int(v)
    except ValueError:
        raise EnvError(f"falcon: {name}={v!r} is not an integer") from None
    if i < minimum:
        raise EnvError(f"falcon: {name}={i} is below {minimum}")
    if i > maximum:
        raise EnvError(f"falcon: {name}={i} is above {maximum}")
    return i


def from_environment(env=None):
    """The ProcessEnv of this process; EnvError naming the variable when one is missing or bad."""
    env = os.environ if env is None else env
    name, job = _first(env, ["FALCON_JOB"])
    if job is None:
        rid = env.get("TORCHELASTIC_RUN_ID", "")
        if rid and rid != "none":
            job = rid
        elif env.get("SLURM_JOB_ID"):
            job = "slurm-" + env["SLURM_JOB_ID"]
    if not job:
        raise EnvError("falcon: no job name: set FALCON_JOB (or torchrun --rdzv_id, or run "
                       "under Slurm)")
    rank = _int(env, ["RANK", "SLURM_PROCID"])
    world = _int(env, ["WORLD_SIZE", "SLURM_NTASKS"], minimum=1)
    if rank >= world:
        raise EnvError(f"falcon: rank {rank} is not below the world size {world}")
    local_rank = _int(env, ["LOCAL_RANK", "SLURM_LOCALID"], default=0)
    _, node = _first(env, ["FALCON_NODE", "SLURMD_NODENAME"])
    _, sock = _first(env, ["FALCON_AGENT_SOCKET"])
    restart = _int(env, ["TORCHELASTIC_RESTART_COUNT", "SLURM_RESTART_COUNT"], default=0)
    epoch = _int(env, ["FALCON_EPOCH"], default=0)
    _, restart_file = _first(env, ["FALCON_RESTART_FILE"])
    profiling = env.get("FALCON_PROFILING", "").strip().lower()
    if profiling not in ("", "0", "false", "no", "off", "1", "true", "yes", "on"):
        raise EnvError(f"falcon: FALCON_PROFILING={env['FALCON_PROFILING']!r} is not 1/true/"
                       "yes/on or 0/false/no/off")
    path = sock or DEFAULT_AGENT_SOCKET
    if len(path.removeprefix("unix:").encode()) > MAX_SOCKET_PATH_BYTES:
        raise EnvError(f"falcon: FALCON_AGENT_SOCKET={path!r} is longer than "
                       f"{MAX_SOCKET_PATH_BYTES} bytes (the unix socket path limit)")
    return ProcessEnv(job=job, rank=rank, world_size=world, local_rank=local_rank,
                      node=node or socket.gethostname(), agent_socket=path,
                      restart_count=restart, epoch=epoch, restart_file=restart_file or "",
                      profiling=profiling in ("1", "true", "yes", "on"))
