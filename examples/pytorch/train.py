"""A small decoder-only transformer trained with DP x PP on torch.distributed (Gloo, CPU), under
Falcon (the `falcon` package). Rank r sits at pipeline stage r // dp, DP index r % dp, as in the
reference trainer (--rank-order stage: a stage's replicas on consecutive ranks, so on one node),
or at stage r % pp, DP index r // pp (--rank-order replica: a whole pipeline on consecutive ranks);
after an S3 relaunch, where the controller's new layout puts it (falcon.relaunch_layout()). Each
stage holds an even share of the layers (falcon.layout.even_stage_blocks, the controller's rule:
the later stages get the extra ones; stage 0 also holds the embedding, the last stage the head),
or what --stage-blocks gives it; after an S2L relaunch, what the controller's layer split gives it
(falcon.relaunch_split()): each DP group's pipeline may then split the layers its own way.
Micro-batches go through the pipeline GPipe-style over send/recv, gradients are summed over the
stage's DP communicator (while the pipelines' splits differ, per group of the D ranks that hold
the same blocks, over a communicator of their own). The global batch (M micro-batches) is the same
whatever the S2 split: DP group d runs micro-batches [sum(m[:d]), sum(m[:d+1])) of it. The model
is the same whatever the layer split (each block is initialised from its own seed).
An S2L layer_split directive is applied at a relaunch: with --checkpoint-dir the session
checkpoints (per block, so that any split resumes from it) and falcon.launch relaunches with the
new split.

    /usr/bin/python3 -m falcon.launch --nnodes 1 --nproc_per_node 4 examples/pytorch/train.py \
        --pp 2 --steps 100

--device-ms X emulates an accelerator on a CPU-only machine: each micro-batch's forward (and its
backward, twice as long) also takes X ms of device time for a stage of --layers / --pp blocks
(X ms x its blocks / (layers / pp) for a stage of another size), waited out at the speed the rank's real
compute got (its thread's CPU time over its wall time, over its recent micro-batches). A rank the operating
system slows down (a CPU quota, a busy core) then has a slower device, as a GPU with a lowered clock
would, while the ranks do not compete for the machine's few cores as pure CPU training does.

The training thread is named "train-main" (PR_SET_NAME), so that a fault driver can throttle the
compute alone (falcon_chaos compute:pid=P,thread=train-main), as a lowered GPU clock slows the
kernels and not the NIC; Gloo's transport threads keep their speed.

Environment as for falcon.init (FALCON_JOB, FALCON_AGENT_SOCKET, ...). --no-falcon runs without
a Falcon session (the overhead benchmark's baseline; the package is still imported, for its even
split). --log FILE: one JSON line per step from the rank
at DP index 0 of the last stage (step, loss, seconds, plan, rank).
"""

import argparse
import contextlib
import json
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

from falcon.layout import even_stage_blocks

# The stage checkpoints' format: 2 has every parameter's whole optimizer state (opt.state[p], by
# its name in the whole model) and the optimizer's hyperparameters; 1 (no "format" key) had the
# SGD momentum only.
CHECKPOINT_FORMAT = 2


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dp", type=int, default=0,
                   help="DP groups; 0: the world size / --pp (after an S4 restart without a node, "
                        "the survivors' DP)")
    p.add_argument("--pp", type=int, default=1)
    p.add_argument("--rank-order", choices=("stage", "replica"), default="stage",
                   help="stage: rank r at stage r // dp, DP index r %% dp; replica: at stage "
                        "r %% pp, DP index r // pp (an S3 relaunch's layout overrides it)")
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--micro-batches", type=int, default=8, help="global micro-batches M")
    p.add_argument("--micro-batch-size", type=int, default=4)
    p.add_argument("--seq", type=int, default=32)
    p.add_argument("--vocab", type=int, default=256)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--stage-blocks", default="",
                   help="B0+B1+... (blocks of each stage, summing to --layers) for every pipeline, "
                        "or one such split per DP group, comma-separated (B0+B1,B0+B1,...); "
                        "default: even. An S2L relaunch's split (FALCON_LAYER_SPLIT) overrides it")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--log", default="")
    p.add_argument("--checkpoint-dir", default="",
                   help="checkpoints (one per stage: at an S4 directive and at the end of the "
                        "run); resumed from when present")
    p.add_argument("--no-falcon", action="store_true")
    p.add_argument("--device-ms", type=float, default=0.0,
                   help="emulated accelerator time per micro-batch forward (see above)")
    p.add_argument("--plan-at", default="",
                   help="STEP:M0,M1,...: from STEP on run this split instead of Falcon's (tests of "
                        "the S2 math: the loss trajectory must not change)")
    a = p.parse_args(argv)
    if a.dp < 0:
        p.error("--dp must be >= 0")
    for name in ("pp", "steps", "micro_batches", "micro_batch_size", "seq", "vocab",
                 "hidden", "heads", "layers"):
        if getattr(a, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1")
    if a.layers < a.pp:
        p.error(f"--layers {a.layers} is fewer than the {a.pp} pipeline stages")
    if a.hidden % a.heads:
        p.error(f"--hidden {a.hidden} is not a multiple of --heads {a.heads}")
    a.split = None
    if a.stage_blocks:
        try:
            a.split = [[int(b) for b in group.split("+")] for group in a.stage_blocks.split(",")]
        except ValueError:
            p.error(f"--stage-blocks {a.stage_blocks!r}: expected B0+B1+...[,B0+B1+...]")
    a.forced = None
    if a.plan_at:
        try:
            at, counts = a.plan_at.split(":")
            a.forced = (int(at), [int(c) for c in counts.split(",")])
        except ValueError:
            p.error(f"--plan-at {a.plan_at!r}: expected STEP:M0,M1,...")
    return a


def check_layout(a, world):
    """Sets a.dp from the world size when 0; exits naming the flag when the layout does not fit."""
    if a.dp == 0:
        if world % a.pp:
            sys.exit(f"train.py: world size {world} is not a multiple of --pp {a.pp}")
        a.dp = world // a.pp
    if world != a.dp * a.pp:
        sys.exit(f"train.py: world size {world} is not --dp {a.dp} x --pp {a.pp}")
    if a.micro_batches < a.dp:
        sys.exit(f"train.py: --micro-batches {a.micro_batches} is fewer than the {a.dp} DP groups")
    if a.forced and (len(a.forced[1]) != a.dp or sum(a.forced[1]) != a.micro_batches or
                     min(a.forced[1]) < 1):
        sys.exit(f"train.py: --plan-at: {a.dp} counts >= 1 summing to {a.micro_batches} expected")
    if a.split is not None:
        if len(a.split) == 1:
            a.split = a.split * a.dp
        why = split_problem(a, a.split)
        if why:
            sys.exit(f"train.py: --stage-blocks {a.stage_blocks}: {why}")


def split_problem(a, split):
    """Why `split` (per DP group, the blocks of each stage) does not fit the job; "" when it
    does."""
    if len(split) != a.dp:
        return f"{len(split)} pipelines' splits for {a.dp} DP groups"
    for d, stages in enumerate(split):
        if len(stages) != a.pp or min(stages) < 1 or sum(stages) != a.layers:
            return (f"DP group {d}'s {'+'.join(str(b) for b in stages)} is not {a.pp} counts >= 1 "
                    f"summing to --layers {a.layers}")
    return ""


def positions(a, world, layout):
    """(dp_index, stage) of every rank: from the S3 relaunch's layout when there is one, else from
    --rank-order. Exits naming the layout when it does not fit the job."""
    if layout is not None:
        if (layout.dp_size, layout.pp_size, layout.tp_size) != (a.dp, a.pp, 1):
            sys.exit(f"train.py: the S3 layout (FALCON_LAYOUT) is DP {layout.dp_size} x PP "
                     f"{layout.pp_size} x TP {layout.tp_size}; this job runs DP {a.dp} x PP "
                     f"{a.pp} (its stage checkpoints hold --pp {a.pp} stages) without TP")
        return [(dp, pp) for dp, pp, _ in layout.positions]
    if a.rank_order == "replica":
        return [(r // a.pp, r % a.pp) for r in range(world)]
    return [(r % a.dp, r // a.dp) for r in range(world)]


@contextlib.contextmanager
def seeded(seed):
    """A context in which torch's CPU generator starts from `seed`, its state restored after:
    torch's modules initialise their parameters from that global generator (their constructors
    take no other), and the script's other random numbers must not depend on the split."""
    with torch.random.fork_rng(devices=[]):
        torch.random.default_generator.manual_seed(seed)
        yield


def make_block(a):
    return nn.TransformerEncoderLayer(a.hidden, a.heads, 4 * a.hidden, dropout=0.0,
                                      batch_first=True)


class Stage(nn.Module):
    """Stage `stage` of a pipeline whose stages hold `stage_blocks` blocks each (None: the even
    split): blocks [first_block, first_block + its count) of the model; stage 0 embeds tokens, the
    last stage has the head. Each part is initialised from a seed of its own (the embedding, each
    block by its index in the model, the head), so the model is the same whatever the split;
    torch's global random state is left as it was (torch.random.fork_rng)."""

    def __init__(self, a, stage, stage_blocks=None):
        super().__init__()
        stage_blocks = stage_blocks or even_stage_blocks(a.layers, a.pp)
        self.first_block = sum(stage_blocks[:stage])
        n = stage_blocks[stage]
        self.first = stage == 0
        self.last = stage == a.pp - 1
        seed = a.seed * 100_003
        if self.first:
            with seeded(seed):
                self.embed = nn.Embedding(a.vocab, a.hidden)
                self.pos = nn.Parameter(torch.zeros(a.seq, a.hidden))
        blocks = []
        for b in range(self.first_block, self.first_block + n):
            with seeded(seed + 1 + b):
                blocks.append(make_block(a))
        self.blocks = nn.ModuleList(blocks)
        if self.last:
            with seeded(seed + 1 + a.layers):
                self.norm = nn.LayerNorm(a.hidden)
                self.head = nn.Linear(a.hidden, a.vocab)
        self.register_buffer("mask", torch.triu(torch.full((a.seq, a.seq), float("-inf")), 1))

    def global_name(self, name):
        """A parameter's name in the whole model: its block by its index in the model."""
        if name.startswith("blocks."):
            _, j, rest = name.split(".", 2)
            return f"blocks.{self.first_block + int(j)}.{rest}"
        return name

    def global_parameters(self):
        """(name in the whole model, parameter) of every parameter."""
        return [(self.global_name(n), p) for n, p in self.named_parameters()]

    def forward(self, x):
        if self.first:
            x = self.embed(x) + self.pos
        for b in self.blocks:
            x = b(x, src_mask=self.mask)
        if self.last:
            x = self.head(self.norm(x))
        return x


def gradient_groups(a, split, names):
    """Where each part of the model sits while the pipelines' splits differ: a part's key is its
    stage in each DP group's pipeline (the embedding at stage 0 and the head at the last in
    every pipeline, block b where split[d] puts it). `names`: this rank's parameters' names in
    the whole model (Stage.global_parameters). {"all": every key of the model, "mine": [(key,
    indices into `names`)] for the keys of this rank's parameters, ascending}: the D ranks of a
    key (DP group d's rank at stage key[d]) hold the same parameters, so each key's gradients are
    summed over them alone."""
    def stage_of(d, block):
        first = 0
        for s, n in enumerate(split[d]):
            if block < first + n:
                return s
            first += n
        raise ValueError(f"block {block} outside DP group {d}'s split {split[d]}")

    def key_of(name):
        if name.startswith("blocks."):
            b = int(name.split(".")[1])
            return tuple(stage_of(d, b) for d in range(a.dp))
        last = name.startswith(("norm.", "head."))
        return tuple([a.pp - 1 if last else 0] * a.dp)

    every = {tuple(stage_of(d, b) for d in range(a.dp)) for b in range(a.layers)}
    every |= {tuple([0] * a.dp), tuple([a.pp - 1] * a.dp)}
    mine = {}
    for i, name in enumerate(names):
        mine.setdefault(key_of(name), []).append(i)
    return {"all": every, "mine": sorted(mine.items())}


class EmulatedDevice:
    """Runs real compute, then waits out device time at the speed the compute got: the thread's
    CPU time over wall time of its recent compute (decayed sums over about the last 20 ops, so
    a CPU quota's throttling, which comes in lumps of its period, reads as its average rate)."""

    DECAY = 0.95

    def __init__(self, ms):
        self.seconds = ms / 1000.0
        self.cpu = self.wall = 0.0

    def run(self, fn, scale=1.0):
        if self.seconds <= 0:
            return fn()
        wall, cpu = time.monotonic(), time.thread_time()
        out = fn()
        self.wall = self.wall * self.DECAY + (time.monotonic() - wall)
        self.cpu = self.cpu * self.DECAY + (time.thread_time() - cpu)
        speed = min(1.0, self.cpu / self.wall) if self.wall > 0 else 1.0
        time.sleep(self.seconds * scale / max(speed, 0.02))
        return out


def micro_batch(a, step, index):
    """Global micro-batch `index` of step `step`: tokens from a fixed sequence rule plus noise,
    the same on every rank that asks (a learnable next-token task)."""
    g = torch.Generator().manual_seed(a.seed * 1_000_003 + step * 4099 + index)
    start = torch.randint(0, a.vocab, (a.micro_batch_size, 1), generator=g)
    stride = torch.randint(1, 4, (a.micro_batch_size, 1), generator=g)
    pos = torch.arange(a.seq + 1).unsqueeze(0)
    tokens = (start + stride * pos) % a.vocab
    return tokens[:, :-1], tokens[:, 1:]


def name_this_thread(name):
    """Sets the calling thread's OS name (/proc/PID/task/TID/comm), at most 15 bytes."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    PR_SET_NAME = 15
    libc.prctl(PR_SET_NAME, name.encode()[:15], 0, 0, 0)


def main(argv):
    a = parse_args(argv)
    name_this_thread("train-main")
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    check_layout(a, world)
    relaunched = None
    split = a.split  # Per DP group, the blocks of each stage; None: even.
    if not a.no_falcon:
        import falcon
        try:
            relaunched = falcon.relaunch_layout()  # An S3 relaunch's layout, or None.
            s2l = falcon.relaunch_split()  # An S2L relaunch's layer split, or None.
        except falcon.LayoutError as e:
            sys.exit(f"train.py: {e}")
        if s2l is not None:
            split = [list(b) for b in s2l.stage_blocks]
        elif relaunched is not None and relaunched.stage_blocks:
            split = [list(b) for b in relaunched.stage_blocks]
        if split is not None and (s2l is not None or relaunched is not None):
            why = split_problem(a, split)
            if why:
                sys.exit(f"train.py: the S2L layer split (FALCON_LAYER_SPLIT or FALCON_LAYOUT): "
                         f"{why}")
    places = positions(a, world, relaunched)
    dpi, stage = places[rank]
    rank_at = {pos: r for r, pos in enumerate(places)}
    # Every rank makes every group, in the same order (dist.new_group's rule).
    dp_ranks = [[rank_at[(d, p)] for d in range(a.dp)] for p in range(a.pp)]
    pp_ranks = [[rank_at[(d, p)] for p in range(a.pp)] for d in range(a.dp)]
    dp_comms = [dist.new_group(g) for g in dp_ranks]
    pp_comms = [dist.new_group(g) for g in pp_ranks]
    dp_comm, pp_comm = dp_comms[stage], pp_comms[dpi]
    prev_rank = pp_ranks[dpi][stage - 1] if stage > 0 else None
    next_rank = pp_ranks[dpi][stage + 1] if stage < a.pp - 1 else None

    mine = split[dpi] if split is not None else None
    model = Stage(a, stage, mine)  # The same parameters on every replica that holds a block.
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9)
    start_step = 0
    # One checkpoint per stage, written by its DP index 0 (every replica holds the same model),
    # its parameters and their whole optimizer state named by their place in the whole model
    # (format 2, resume()): any DP size and any layer split resumes from the stage files together,
    # so the survivors of an S4 restart without a node, and an S2L relaunch with a new split, go
    # on with the same model, optimizer state and global batch.
    ckpt = os.path.join(a.checkpoint_dir, f"stage{stage}.pt") if a.checkpoint_dir else ""
    if ckpt and os.path.exists(ckpt):
        start_step = resume(a, model, opt, stage)
    # Every stage resumes from the same step, or the pipeline would mix iterations (a stage file
    # missing or stale on this node: --checkpoint-dir must be shared by the nodes).
    steps = torch.tensor([start_step, -start_step])
    dist.all_reduce(steps, op=dist.ReduceOp.MAX)
    if steps[0] != -steps[1]:
        sys.exit(f"train.py: stage {stage} resumes at step {start_step} from {ckpt!r}, other ranks "
                 f"between {-int(steps[1])} and {int(steps[0])}: the stage checkpoints in "
                 f"--checkpoint-dir {a.checkpoint_dir!r} disagree")

    def checkpoint(_dir, iteration, _excluded):
        if ckpt and dpi == 0:
            os.makedirs(a.checkpoint_dir, exist_ok=True)
            torch.save(checkpoint_state(model, opt, max(iteration, 0)), ckpt + ".tmp")
            os.replace(ckpt + ".tmp", ckpt)  # The survivors never read half a checkpoint.

    fs = None
    if not a.no_falcon:
        # S2L: every block weighs its parameters and their SGD momentum, float32.
        block_bytes = 2 * 4 * sum(p.numel() for p in model.blocks[0].parameters())
        fs = falcon.init(dp_size=a.dp, pp_size=a.pp, dp_index=dpi, pp_index=stage,
                         global_micro_batches=a.micro_batches, pipeline_blocks=a.layers,
                         block_state_bytes=block_bytes,
                         checkpoint_fn=checkpoint if ckpt else None)
        for p, g in enumerate(dp_comms):
            if p == stage:
                fs.register_group(g, "dp")
        if a.pp > 1:
            fs.register_group(pp_comm, "pp")
    params = [p for p in model.parameters()]
    flat = torch.zeros(sum(p.numel() for p in params))
    # While the pipelines' splits differ, a stage's replicas hold different blocks: the gradients
    # are summed per group of the D ranks that hold the same parts (gradient_groups), over a
    # communicator of their own, each rank taking its groups in the same global order.
    uneven = split is not None and len({tuple(b) for b in split}) > 1
    if uneven:
        groups = gradient_groups(a, split, [n for n, _ in model.global_parameters()])
        # Every rank makes every group's communicator, in the same order (dist.new_group's rule).
        group_comms = {key: dist.new_group([rank_at[(d, s)] for d, s in enumerate(key)])
                       for key in sorted(groups["all"])}
        my_groups = [(key, [params[i] for i in idx], torch.zeros(
            sum(params[i].numel() for i in idx))) for key, idx in groups["mine"]]
    blocks_scale = len(model.blocks) / (a.layers / a.pp)  # Device time per block held.
    log = open(a.log, "a") if a.log and stage == a.pp - 1 and dpi == 0 else None
    act_shape = (a.micro_batch_size, a.seq, a.hidden)
    device = EmulatedDevice(a.device_ms)

    for step in range(start_step, a.steps):
        t0 = time.monotonic()
        ctx = fs.step(step) if fs else _NoStep()
        with ctx as st:
            plan = fs.plan() if fs else _even(a.micro_batches, a.dp)
            if a.forced and step >= a.forced[0]:
                plan = a.forced[1]
            scale = 1.0 / a.micro_batches
            first = sum(plan[:dpi])
            opt.zero_grad(set_to_none=False)
            inputs, outputs, local_loss = [], [], 0.0
            for j in range(plan[dpi]):  # GPipe: every forward, then every backward.
                x, y = micro_batch(a, step, first + j)
                if stage > 0:
                    h = torch.empty(act_shape)
                    dist.recv(h, prev_rank)
                    h.requires_grad_()
                    x = h
                out = device.run(lambda: model(x), blocks_scale)
                if next_rank is not None:
                    dist.send(out.detach(), next_rank)
                inputs.append(x)
                outputs.append((out, y))
            for j in reversed(range(plan[dpi])):
                out, y = outputs[j]
                if next_rank is None:
                    loss = F.cross_entropy(out.reshape(-1, a.vocab), y.reshape(-1)) * scale
                    local_loss += loss.item()
                    device.run(loss.backward, 2.0 * blocks_scale)
                else:
                    g = torch.empty(act_shape)
                    dist.recv(g, next_rank)
                    device.run(lambda: out.backward(g), 2.0 * blocks_scale)
                if prev_rank is not None:
                    dist.send(inputs[j].grad, prev_rank)
            # Sum the gradients over the DP communicator: with the 1/M scale, the global mean.
            if uneven:
                for key, ps, buf in my_groups:
                    torch.cat([p.grad.reshape(-1) for p in ps], out=buf)
                    dist.all_reduce(buf, group=group_comms[key])
                    offset = 0
                    for p in ps:
                        p.grad.copy_(buf[offset:offset + p.numel()].view_as(p))
                        offset += p.numel()
            else:
                torch.cat([p.grad.reshape(-1) for p in params], out=flat)
                dist.all_reduce(flat, group=dp_comm)
                offset = 0
                for p in params:
                    p.grad.copy_(flat[offset:offset + p.numel()].view_as(p))
                    offset += p.numel()
            opt.step()
            loss_t = torch.tensor([local_loss])
            if stage == a.pp - 1:
                dist.all_reduce(loss_t, group=dp_comm)
            st.loss = float(loss_t[0])
        if log:
            held = split or [even_stage_blocks(a.layers, a.pp)] * a.dp
            log.write(json.dumps({"step": step, "loss": st.loss, "seconds": time.monotonic() - t0,
                                  "plan": plan, "rank": rank, "stage_blocks": held,
                                  "end_unix_ms": int(time.time() * 1000)}) + "\n")
            log.flush()
    if fs:
        fs.close()
    checkpoint(a.checkpoint_dir, a.steps, [])  # The end of the run: a later run goes on from it.
    dist.barrier()
    dist.destroy_process_group()


def checkpoint_state(model, opt, step):
    """What a stage checkpoint holds (format CHECKPOINT_FORMAT): the stage's parameters and each
    one's whole optimizer state by its name in the whole model, the optimizer's hyperparameters
    per parameter group, and the step to resume at."""
    params = model.global_parameters()
    return {"format": CHECKPOINT_FORMAT,
            "model": {n: p.detach() for n, p in params},
            # Every entry of each parameter's optimizer state (SGD: its momentum buffer).
            "optimizer": {n: dict(opt.state[p]) for n, p in params if opt.state.get(p)},
            # Each parameter group's hyperparameters (lr, momentum, ...), without its parameters.
            "param_groups": [{k: v for k, v in g.items() if k != "params"}
                             for g in opt.param_groups],
            "step": step}


def resume(a, model, opt, stage):
    """Loads this stage's parameters and their optimizer state from the stage checkpoints of
    --checkpoint-dir (by their names in the whole model: whatever split wrote them), and the
    optimizer's hyperparameters; the step they were written at. Exits naming the file when one is
    missing, of another format (CHECKPOINT_FORMAT) or step, or lacks a parameter."""
    params, states, steps, groups = {}, {}, {}, None
    for s in range(a.pp):
        path = os.path.join(a.checkpoint_dir, f"stage{s}.pt")
        if not os.path.exists(path):
            sys.exit(f"train.py: stage {stage} resumes from {a.checkpoint_dir!r}, which lacks "
                     f"stage{s}.pt")
        state = torch.load(path)
        version = state.get("format", 1) if isinstance(state, dict) else None
        if version != CHECKPOINT_FORMAT:
            sys.exit(f"train.py: {path} is a stage checkpoint of format {version}; this script "
                     f"reads format {CHECKPOINT_FORMAT} (whole optimizer state per parameter): "
                     "start without it, or resume with the script that wrote it")
        params.update(state["model"])
        states.update(state["optimizer"])
        steps[path] = state["step"]
        groups = state["param_groups"] if s == stage else groups
    if len(set(steps.values())) > 1:
        sys.exit(f"train.py: the stage checkpoints in --checkpoint-dir {a.checkpoint_dir!r} are "
                 f"of different steps: {steps}")
    if len(groups) != len(opt.param_groups):
        sys.exit(f"train.py: stage{stage}.pt in {a.checkpoint_dir!r} has {len(groups)} optimizer "
                 f"parameter groups, this stage's optimizer {len(opt.param_groups)}")
    for group, saved in zip(opt.param_groups, groups):
        group.update(saved)
    with torch.no_grad():
        for name, p in model.global_parameters():
            if name not in params:
                sys.exit(f"train.py: the checkpoints in {a.checkpoint_dir!r} lack {name}")
            p.copy_(params[name])
            if name in states:
                opt.state[p] = {k: v.clone() if torch.is_tensor(v) else v
                                for k, v in states[name].items()}
    return next(iter(steps.values()))


class _NoStep:
    loss = 0.0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _even(total, parts):
    base, extra = divmod(total, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


if __name__ == "__main__":
    main(sys.argv[1:])
