"""The job's layout after an S3 relaunch: where each rank sits (DP, PP, TP index) in a
topology-change directive's new layout, which the PyTorch package applies at a relaunch, not live
(docs/pytorch.md#s4-and-s3).

On a topology_change directive the session checkpoints and leaves the layout in the restart
request (field "layout", the JSON form below); falcon.launch writes it to a file of its own and
relaunches every node with FALCON_LAYOUT naming that file. The script then builds its process
groups from `relaunch_layout()` instead of its default rank order:

    layout = falcon.relaunch_layout()        # None: no S3 relaunch, use the default order
    dp, pp, tp = layout.position(rank)
    dp_ranks = layout.dp_group(pp)            # this stage's replicas, by DP index
    pp_ranks = layout.pp_group(dp)            # this replica's stages, by PP index

JSON form: {"dp_size": D, "pp_size": P, "tp_size": T, "positions": [[dp, pp, tp], ...] (one per
rank, indexed by rank), "plan_version": V (the directive's: the session reports it),
"micro_batches": [m_0, ...] (the S2 plan in force, carried over when D is unchanged; absent or
empty: the even split) and "stage_blocks": [[b_0, ..., b_{P-1}], ...] (the S2L layer split in
force, per DP group; absent or empty: every pipeline split evenly)}.

An S2L layer_split directive is applied at a relaunch too when the script registered no way to
apply it live (Session.on_layer_split): the restart request's "layer_split" ({"stage_blocks",
"micro_batches", "plan_version"}, the LayerSplit JSON form) goes to a file of falcon.launch's own
named by FALCON_LAYER_SPLIT, and the ranks keep their places (FALCON_LAYOUT, if set, stays):

    split = falcon.relaunch_split()          # None: no S2L relaunch, every pipeline even
    blocks = split.stage_blocks[dp] if split else None   # this replica's blocks per stage
"""

import dataclasses
import os
import re

from falcon import env as _env
from falcon import jsonfile


class LayoutError(ValueError):
    """A layout that is malformed or does not fit the job; the message names the field."""


@dataclasses.dataclass(frozen=True)
class Layout:
    dp_size: int
    pp_size: int
    tp_size: int
    positions: tuple  # (dp, pp, tp) per rank, indexed by global rank.
    plan_version: int = 0
    micro_batches: tuple = ()
    stage_blocks: tuple = ()  # Per DP group, its blocks per stage; () every pipeline even.
    _by_position: dict = dataclasses.field(default=None, compare=False, repr=False)

    def __post_init__(self):
        object.__setattr__(self, "_by_position", {p: r for r, p in enumerate(self.positions)})

    @property
    def world_size(self):
        return len(self.positions)

    def position(self, rank):
        """(dp_index, pp_index, tp_index) of global `rank`; LayoutError outside the world."""
        if not isinstance(rank, int) or not 0 <= rank < len(self.positions):
            raise LayoutError(f"falcon: rank {rank!r} is not in the layout's world of "
                              f"{len(self.positions)}")
        return self.positions[rank]

    def rank_at(self, dp, pp, tp=0):
        """The global rank at (dp, pp, tp); LayoutError when no rank sits there."""
        r = self._by_position.get((dp, pp, tp))
        if r is not None:
            return r
        raise LayoutError(f"falcon: no rank at dp {dp}, pp {pp}, tp {tp} in the layout")

    def dp_group(self, pp, tp=0):
        """The ranks of pipeline stage `pp` (and TP index `tp`), ordered by DP index."""
        return [self.rank_at(d, pp, tp) for d in range(self.dp_size)]

    def pp_group(self, dp, tp=0):
        """The ranks of replica `dp` (and TP index `tp`), ordered by PP index (stage)."""
        return [self.rank_at(dp, p, tp) for p in range(self.pp_size)]

    def to_json(self):
        out = {"dp_size": self.dp_size, "pp_size": self.pp_size, "tp_size": self.tp_size,
               "positions": [list(p) for p in self.positions], "plan_version": self.plan_version}
        if self.micro_batches:
            out["micro_batches"] = list(self.micro_batches)
        if self.stage_blocks:
            out["stage_blocks"] = [list(b) for b in self.stage_blocks]
        return out


@dataclasses.dataclass(frozen=True)
class LayerSplit:
    """An S2L layer split (falcon.v1.LayerSplit): per DP group (by DP index) the blocks each
    pipeline stage holds, and the micro-batch plan that goes with it."""
    stage_blocks: tuple  # Per DP group: (blocks of stage 0, ..., of stage P-1), each >= 1.
    micro_batches: tuple  # Per DP group, each >= 1.
    plan_version: int = 0

    @property
    def dp_size(self):
        return len(self.stage_blocks)

    @property
    def pp_size(self):
        return len(self.stage_blocks[0])

    @property
    def blocks(self):
        """The model's blocks (every pipeline holds them all)."""
        return sum(self.stage_blocks[0])

    def to_json(self):
        return {"stage_blocks": [list(b) for b in self.stage_blocks],
                "micro_batches": list(self.micro_batches), "plan_version": self.plan_version}


MAX_EPOCH = _env.MAX_U32  # FALCON_EPOCH's largest.
MAX_PLAN_VERSION = 2**62  # The proto's int64, with room: larger is no plan version.
FIELDS = ("dp_size", "pp_size", "tp_size", "positions", "plan_version", "micro_batches",
          "stage_blocks")
SPLIT_FIELDS = ("stage_blocks", "micro_batches", "plan_version")
MAX_BLOCKS = 4096  # common::kMaxPipelineBlocks.


def even_stage_blocks(blocks, stages):
    """The even split of `blocks` blocks over `stages` pipeline stages, the one rule of
    common::EvenStageBlocks (common/layer_split.h) that the controller, the shim and the reference
    trainer use: stage s holds blocks [s * blocks // stages, (s + 1) * blocks // stages), so the
    later stages get the extra blocks (7 over 3: [2, 2, 3]). ValueError unless
    1 <= stages <= blocks."""
    if not _is_count(stages, 1) or not _is_count(blocks, stages, MAX_BLOCKS):
        raise ValueError(f"even_stage_blocks: {blocks!r} blocks over {stages!r} stages (need "
                         f"1 <= stages <= blocks <= {MAX_BLOCKS})")
    return [(s + 1) * blocks // stages - s * blocks // stages for s in range(stages)]


def is_even_split(stage_blocks):
    """Whether every pipeline of `stage_blocks` (per DP group, the blocks of each stage) holds the
    even split of its blocks (even_stage_blocks); True for an empty list."""
    return all(list(b) == even_stage_blocks(sum(b), len(b)) for b in stage_blocks)


def _is_count(v, minimum, maximum=_env.MAX_U32):
    return isinstance(v, int) and not isinstance(v, bool) and minimum <= v <= maximum


def check_stage_blocks(stage_blocks, dp_size, pp_size, where, blocks=0):
    """`stage_blocks` as a tuple of tuples: `dp_size` lists of `pp_size` counts >= 1 that all sum
    to the same number of blocks (`blocks` when non-zero), at most 4096. LayoutError naming the
    field otherwise."""
    if not isinstance(stage_blocks, (list, tuple)) or len(stage_blocks) != dp_size:
        raise LayoutError(f"{where}: \"stage_blocks\" holds {stage_blocks!r}, not {dp_size} "
                          "lists (one per DP group) of blocks per stage")
    out = []
    for d, stages in enumerate(stage_blocks):
        if not isinstance(stages, (list, tuple)) or len(stages) != pp_size or \
                not all(_is_count(b, 1, MAX_BLOCKS) for b in stages):
            raise LayoutError(f"{where}: \"stage_blocks\"[{d}] holds {stages!r}, not {pp_size} "
                              f"counts in [1, {MAX_BLOCKS}] (one per stage)")
        total = sum(stages)
        want = blocks or (sum(out[0]) if out else total)
        if total != want:
            raise LayoutError(f"{where}: \"stage_blocks\"[{d}] sums to {total} blocks, not the "
                              f"model's {want}")
        out.append(tuple(stages))
    return tuple(out)


def _checked(dp_size, pp_size, tp_size, positions, plan_version, micro_batches, where,
             stage_blocks=()):
    for name, v in (("dp_size", dp_size), ("pp_size", pp_size), ("tp_size", tp_size)):
        if not _is_count(v, 1):
            raise LayoutError(f"{where}: \"{name}\" holds {v!r}, not an integer >= 1")
    if dp_size * pp_size * tp_size != len(positions):
        raise LayoutError(f"{where}: dp_size x pp_size x tp_size = "
                          f"{dp_size * pp_size * tp_size} is not the {len(positions)} ranks of "
                          "\"positions\"")
    seen = {}
    for rank, p in enumerate(positions):
        if not isinstance(p, (list, tuple)) or len(p) != 3 or \
                not all(_is_count(i, 0) for i in p):
            raise LayoutError(f"{where}: \"positions\"[{rank}] holds {p!r}, not [dp, pp, tp]")
        for name, i, size in (("dp", p[0], dp_size), ("pp", p[1], pp_size), ("tp", p[2], tp_size)):
            if i >= size:
                raise LayoutError(f"{where}: \"positions\"[{rank}]: {name} index {i} is not "
                                  f"below {name}_size {size}")
        other = seen.setdefault(tuple(p), rank)
        if other != rank:
            raise LayoutError(f"{where}: ranks {other} and {rank} both sit at dp {p[0]}, "
                              f"pp {p[1]}, tp {p[2]}")
    if not _is_count(plan_version, 0, MAX_PLAN_VERSION):
        raise LayoutError(f"{where}: \"plan_version\" holds {plan_version!r}, not an integer "
                          "in [0, 2^62]")
    if not isinstance(micro_batches, (list, tuple)) or \
            (micro_batches and (len(micro_batches) != dp_size or
                                not all(_is_count(m, 1) for m in micro_batches))):
        raise LayoutError(f"{where}: \"micro_batches\" holds {micro_batches!r}, not "
                          f"{dp_size} counts >= 1 (one per DP group), or [] for the even split")
    if stage_blocks not in ((), []):
        stage_blocks = check_stage_blocks(stage_blocks, dp_size, pp_size, where)
    return Layout(dp_size, pp_size, tp_size, tuple(tuple(p) for p in positions), plan_version,
                  tuple(micro_batches), tuple(stage_blocks))


def from_json(obj, where="layout"):
    """The Layout of the JSON form (module doc); LayoutError naming the field when malformed."""
    if not isinstance(obj, dict):
        raise LayoutError(f"{where}: not a JSON object")
    unknown = sorted(k for k in obj if k not in FIELDS)
    if unknown:
        raise LayoutError(f"{where}: unknown fields {unknown} (a layout has {list(FIELDS)})")
    positions = obj.get("positions")
    if not isinstance(positions, list) or not positions:
        raise LayoutError(f"{where}: \"positions\" holds {positions!r}, not a list of one "
                          "[dp, pp, tp] per rank")
    return _checked(obj.get("dp_size"), obj.get("pp_size"), obj.get("tp_size"), positions,
                    obj.get("plan_version", 0), obj.get("micro_batches", []), where,
                    obj.get("stage_blocks", ()))


def split_from_json(obj, where="layer_split"):
    """The LayerSplit of its JSON form ({"stage_blocks", "micro_batches", "plan_version"});
    LayoutError naming the field when malformed."""
    if not isinstance(obj, dict):
        raise LayoutError(f"{where}: not a JSON object")
    unknown = sorted(k for k in obj if k not in SPLIT_FIELDS)
    if unknown:
        raise LayoutError(f"{where}: unknown fields {unknown} (a layer split has "
                          f"{list(SPLIT_FIELDS)})")
    stage_blocks = obj.get("stage_blocks")
    if not isinstance(stage_blocks, list) or not stage_blocks or \
            not isinstance(stage_blocks[0], list) or not stage_blocks[0]:
        raise LayoutError(f"{where}: \"stage_blocks\" holds {stage_blocks!r}, not a list of "
                          "one list of blocks per stage per DP group")
    return layer_split(stage_blocks, obj.get("micro_batches"), obj.get("plan_version", 0), where)


def layer_split(stage_blocks, micro_batches, plan_version=0, where="layer_split", blocks=0):
    """A checked LayerSplit: as many micro-batch counts (each >= 1) as DP groups, every DP group
    as many stages as the first, each stage >= 1 block, every pipeline the same blocks (`blocks`
    when non-zero). LayoutError naming the field."""
    if not isinstance(stage_blocks, (list, tuple)) or not stage_blocks or \
            not isinstance(stage_blocks[0], (list, tuple)):
        raise LayoutError(f"{where}: \"stage_blocks\" holds {stage_blocks!r}, not a list of "
                          "one list of blocks per stage per DP group")
    dp, pp = len(stage_blocks), len(stage_blocks[0])
    checked = check_stage_blocks(stage_blocks, dp, pp, where, blocks)
    if not isinstance(micro_batches, (list, tuple)) or len(micro_batches) != dp or \
            not all(_is_count(m, 1) for m in micro_batches):
        raise LayoutError(f"{where}: \"micro_batches\" holds {micro_batches!r}, not {dp} counts "
                          ">= 1 (one per DP group)")
    if not _is_count(plan_version, 0, MAX_PLAN_VERSION):
        raise LayoutError(f"{where}: \"plan_version\" holds {plan_version!r}, not an integer "
                          "in [0, 2^62]")
    return LayerSplit(checked, tuple(micro_batches), plan_version)


def from_assignments(assignments, world_size, plan_version=0, micro_batches=()):
    """The Layout of a topology_change directive's assignments ((rank, dp, pp, tp) tuples, one
    per rank): sizes are the largest index + 1. LayoutError naming the assignment when one is
    missing, repeated or outside the world."""
    where = "topology_change.assignments"
    if len(assignments) != world_size:
        raise LayoutError(f"{where}: {len(assignments)} entries, need one per rank "
                          f"({world_size})")
    positions = [None] * world_size
    for i, (rank, dp, pp, tp) in enumerate(assignments):
        for name, index in (("dp_index", dp), ("pp_index", pp), ("tp_index", tp)):
            if not 0 <= index < world_size:  # Each size divides the world.
                raise LayoutError(f"{where}[{i}].{name}: {index} is not below the world size "
                                  f"{world_size}")
        if not 0 <= rank < world_size:
            raise LayoutError(f"{where}[{i}].rank: {rank} is not a rank of the world of "
                              f"{world_size}")
        if positions[rank] is not None:
            raise LayoutError(f"{where}[{i}].rank: rank {rank} is assigned twice")
        positions[rank] = (dp, pp, tp)
    sizes = [max(p[k] for p in positions) + 1 for k in range(3)]
    return _checked(*sizes, positions, plan_version, micro_batches, where)


def read(path):
    """The Layout in the file at `path`; LayoutError naming the file and field; OSError when
    unreadable."""
    return from_json(jsonfile.load(path, LayoutError), path)


def write(path, layout):
    """Writes `layout` (a Layout) to `path` atomically; OSError when it cannot."""
    jsonfile.write(path, layout.to_json())


def relaunch_layout(environment=None):
    """The layout an S3 relaunch runs the job in (FALCON_LAYOUT, set by falcon.launch), or None
    when the job runs in its own default order. LayoutError naming the variable (and the field)
    when the file cannot be read, is malformed, or does not fit the world size (WORLD_SIZE, or
    SLURM_NTASKS)."""
    e = os.environ if environment is None else environment
    path = e.get("FALCON_LAYOUT", "")
    if not path:
        return None
    try:
        layout = read(path)
    except LayoutError as err:
        raise LayoutError(f"FALCON_LAYOUT: {err}") from None
    except OSError as err:
        raise LayoutError(f"FALCON_LAYOUT={path}: cannot read it ({err.strerror or err})") \
            from None
    name = "WORLD_SIZE" if e.get("WORLD_SIZE") else "SLURM_NTASKS"
    world = e.get(name, "")
    if re.fullmatch(r"[0-9]+", world) and int(world) != layout.world_size:
        raise LayoutError(f"FALCON_LAYOUT={path}: {layout.world_size} ranks, but {name} is "
                          f"{world}")
    return layout


def write_split(path, split):
    """Writes `split` (a LayerSplit) to `path` atomically; OSError when it cannot."""
    jsonfile.write(path, split.to_json())


def relaunch_split(environment=None):
    """The layer split an S2L relaunch runs the job with (FALCON_LAYER_SPLIT, set by
    falcon.launch), or None (every pipeline split evenly, or as FALCON_LAYOUT's "stage_blocks"
    say). LayoutError naming the variable (and the field) when the file cannot be read or is
    malformed."""
    e = os.environ if environment is None else environment
    path = e.get("FALCON_LAYER_SPLIT", "")
    if not path:
        return None
    try:
        return split_from_json(jsonfile.load(path, LayoutError), path)
    except LayoutError as err:
        raise LayoutError(f"FALCON_LAYER_SPLIT: {err}") from None
    except OSError as err:
        raise LayoutError(f"FALCON_LAYER_SPLIT={path}: cannot read it ({err.strerror or err})") \
            from None
