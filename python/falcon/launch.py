"""`python3 -m falcon.launch TORCHRUN_ARGS... script.py ARGS...`: torchrun, made to work on
Debian 12, that relaunches the job without the nodes a Falcon S4 directive excluded, or in the
new layout of an S3 directive.

torchrun 1.13 on Python 3.11 fails parsing its default stdio redirects (its `Std` enum lookup); it
works when given `--redirects` and `--tee` explicitly. This adds `--redirects 1 --tee 1` (rank
stdout and stderr to files under the log dir, and still to the console) unless the command line
sets them.

S4 (docs/pytorch.md#s4-and-s3): torchrun runs as a child with FALCON_RESTART_FILE naming a file of
this launcher's own (a private temporary directory). When an S4 directive ends the job, local rank
0 of each node leaves the restart request there (session.write_restart_request: checkpoint_dir,
excluded_ranks, iteration, epoch) and the ranks exit with RESTART_EXIT_CODE. When torchrun then
fails, the launcher
  - leaves (exit 0) when every rank it ran is excluded: its node is out of the job;
  - otherwise runs torchrun again with --nnodes less the excluded nodes, its --node_rank among the
    surviving nodes, --master_port + 1 and FALCON_EPOCH set to the request's epoch: the script
    resumes from its checkpoint with the survivors, at the controller's new epoch.
S3 (a request with "layout" and no excluded ranks): every node runs torchrun again with the same
nodes, --master_port + 1, FALCON_EPOCH set to the request's epoch and FALCON_LAYOUT naming a file
of this launcher's own that holds the layout (falcon.layout): the script resumes from its
checkpoint with its ranks in the new places. S2L (a request with "layer_split" and no excluded
ranks, from a layer split the script did not apply live): the same, with FALCON_LAYER_SPLIT
naming a file that holds the split (falcon.relaunch_split()); the ranks keep their places
(FALCON_LAYOUT, if set, stays). An S3 relaunch drops FALCON_LAYER_SPLIT (its layout carries the
split in force); an S4 relaunch drops both (the survivors are fewer: the script's default order
and the even split again).
The relaunch needs static rendezvous (torchrun's default: --master_addr, --node_rank, an integer
--nnodes and --nproc_per_node, ranks node-major as torchrun assigns them) and --max_restarts 0 (with
more, torchrun itself would restart the workers that exit for S4, in the same world: refused at
start). A request it cannot follow (part of a node excluded, the node at --master_addr excluded, a
malformed file) is printed, naming the field or flag, and the launcher exits with
RESTART_EXIT_CODE so that an outer scheduler (a Slurm requeue) can take over. Without a request, or
once the launcher was told to stop (SIGTERM, SIGINT), it exits with torchrun's status.
"""

import os
import shutil
import signal
import subprocess
import sys
import tempfile

from falcon import jsonfile
from falcon import layout as layout_mod

RESTART_EXIT_CODE = 75  # session.RESTART_EXIT_CODE (not imported: that loads torch and the shim).
DEFAULT_MASTER_PORT = 29500  # torchrun's.


class RelaunchError(ValueError):
    """A restart request or command line the launcher cannot relaunch from; names the field or
    flag."""


def _script_at(argv):
    return next((i for i, a in enumerate(argv) if a.endswith(".py") or a in ("-m",)), len(argv))


def torchrun_argv(argv):
    """argv with the redirect flags added before the script when absent."""
    argv = list(argv)
    script_at = _script_at(argv)
    launcher = argv[:script_at]

    def has(flag):
        return any(a == flag or a.startswith(flag + "=") for a in launcher)

    extra = []
    if not has("--redirects") and not has("-r"):
        extra += ["--redirects", "1"]
    if not has("--tee") and not has("-t"):
        extra += ["--tee", "1"]
    return launcher + extra + argv[script_at:]


def parse_torchrun(args):
    """(torchrun's own namespace for `args`, the index where the script starts);
    RelaunchError when torchrun would not accept them."""
    from torch.distributed.run import get_args_parser

    parser = get_args_parser()

    def refuse(message):  # argparse's error() prints usage and exits; name the problem instead.
        raise RelaunchError(f"torchrun does not accept the arguments {args!r}: {message}")

    parser.error = refuse
    ns = parser.parse_args(args)
    return ns, len(args) - 1 - len(ns.training_script_args)


def _node_range(value, flag):
    """(MIN, MAX) from a torchrun node count ("N" or "MIN:MAX", 1 <= MIN <= MAX); RelaunchError
    naming `flag` otherwise."""
    parts = str(value).split(":")
    if len(parts) > 2 or not all(p.isdigit() and int(p) >= 1 for p in parts) or \
            int(parts[0]) > int(parts[-1]):
        raise RelaunchError(f"{flag}={value!r} is not a node count (N, or MIN:MAX with "
                            "1 <= MIN <= MAX)")
    return int(parts[0]), int(parts[-1])


def _node_count(value, flag):
    """An integer count from a torchrun flag ("N" or "N:N")."""
    try:
        low, high = _node_range(value, flag)
    except RelaunchError:
        low, high = 0, -1
    if low != high:
        raise RelaunchError(f"{flag}={value!r} is not an integer >= 1: a relaunch needs "
                            "static rendezvous with fixed node counts")
    return low


def check_supervisable(args):
    """RelaunchError naming the flag when the launcher could not follow an S4 restart of a job
    started with torchrun `args`: --max_restarts other than 0, or a --nnodes that is no node
    count (0, "abc": torchrun itself would end in a traceback)."""
    ns, _ = parse_torchrun(args)
    _node_range(ns.nnodes, "--nnodes")
    if ns.max_restarts != 0:
        raise RelaunchError(f"--max_restarts={ns.max_restarts}: torchrun would restart the workers "
                            "that exit for an S4 restart in the same world; falcon.launch "
                            "relaunches them without the excluded nodes (leave it at 0)")


def read_restart_request(path):
    """The restart request at `path` (dict with excluded_ranks: list of ints, epoch, iteration:
    ints >= 0, checkpoint_dir: str; S3: "layout" in falcon.layout's JSON form and no excluded
    ranks; S2L: "layer_split" in falcon.layout.LayerSplit's JSON form and no excluded ranks; S4:
    a non-empty excluded_ranks); RelaunchError naming the field when malformed; OSError when
    unreadable."""
    r = jsonfile.load(path, RelaunchError)
    if not isinstance(r, dict):
        raise RelaunchError(f"{path}: not a JSON object")
    ex = r.get("excluded_ranks")
    if "layer_split" in r:  # S2L: the same nodes and places, a new split.
        if "layout" in r:
            raise RelaunchError(f"{path}: \"layer_split\" beside a \"layout\": a request is "
                                "one relaunch (S3 carries the split in its layout)")
        if ex not in (None, []):
            raise RelaunchError(f"{path}: \"excluded_ranks\" holds {ex!r} beside a "
                                "\"layer_split\": an S2L relaunch keeps every rank")
        try:
            layout_mod.split_from_json(r["layer_split"], f"{path}: \"layer_split\"")
        except layout_mod.LayoutError as e:
            raise RelaunchError(str(e)) from None
        r["excluded_ranks"] = []
    elif "layout" in r:  # S3: the same nodes in a new layout.
        if ex not in (None, []):
            raise RelaunchError(f"{path}: \"excluded_ranks\" holds {ex!r} beside a \"layout\": "
                                "an S3 relaunch keeps every rank")
        try:
            layout_mod.from_json(r["layout"], f"{path}: \"layout\"")
        except layout_mod.LayoutError as e:
            raise RelaunchError(str(e)) from None
        r["excluded_ranks"] = []
    elif not isinstance(ex, list) or not ex or \
            not all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in ex):
        raise RelaunchError(f"{path}: \"excluded_ranks\" holds {ex!r}, not a non-empty list of "
                            "ranks")
    # The epoch becomes FALCON_EPOCH, which the session takes up to 2^32 - 1.
    for k, top in (("epoch", layout_mod.MAX_EPOCH), ("iteration", 2**62)):
        v = r.get(k, 0)
        if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v <= top:
            raise RelaunchError(f"{path}: \"{k}\" holds {v!r}, not an integer in [0, {top}]")
    if not isinstance(r.get("checkpoint_dir", ""), str):
        raise RelaunchError(f"{path}: \"checkpoint_dir\" holds {r['checkpoint_dir']!r}, not a "
                            "path")
    return r


def relaunch_argv(args, request):
    """The torchrun args for the survivors of `request` (S3: every node, in the same places), or
    None when every rank of this node is excluded (the node leaves). RelaunchError naming the
    flag or rank when the request cannot be followed. The new --nnodes, --node_rank and
    --master_port go just before the script (torchrun takes the last value of a flag)."""
    ns, script_at = parse_torchrun(args)
    if ns.rdzv_backend != "static":
        raise RelaunchError(f"--rdzv_backend={ns.rdzv_backend}: a relaunch needs static "
                            "rendezvous (--master_addr, --node_rank)")
    nnodes = _node_count(ns.nnodes, "--nnodes")
    nproc = _node_count(ns.nproc_per_node, "--nproc_per_node")
    node_rank = ns.node_rank
    if not 0 <= node_rank < nnodes:
        raise RelaunchError(f"--node_rank={node_rank} is not a node of --nnodes={nnodes}")
    excluded = set(request["excluded_ranks"])
    world = nnodes * nproc
    if "layout" in request:
        ranks = len(request["layout"]["positions"])
        if ranks != world:
            raise RelaunchError(f"the S3 layout places {ranks} ranks, but --nnodes {nnodes} x "
                                f"--nproc_per_node {nproc} run {world}")
    outside = sorted(r for r in excluded if r >= world)
    if outside:
        raise RelaunchError(f"excluded_ranks {outside} are not ranks of this job (world {world})")
    gone = []
    for node in range(nnodes):
        ranks = set(range(node * nproc, (node + 1) * nproc))
        if ranks <= excluded:
            gone.append(node)
        elif ranks & excluded:
            raise RelaunchError(f"excluded_ranks {sorted(ranks & excluded)} are part of node_rank "
                                f"{node}'s ranks {sorted(ranks)}: the launcher relaunches whole "
                                "nodes")
    if 0 in gone:  # Checked first: node 0 must not leave a job its launchers cannot go on with.
        raise RelaunchError("excluded_ranks take node_rank 0, which holds --master_addr: the "
                            "survivors have no rendezvous (use a scheduler's requeue)")
    if node_rank in gone:
        return None
    new = [f"--nnodes={nnodes - len(gone)}",
           f"--node_rank={node_rank - sum(1 for g in gone if g < node_rank)}",
           f"--master_port={(ns.master_port or DEFAULT_MASTER_PORT) + 1}"]
    return list(args[:script_at]) + new + list(args[script_at:])


class _Torchrun:
    """torchrun as a child of this process (same process group: a terminal's Ctrl-C or a killpg
    reaches both); a SIGTERM sent to the launcher alone is passed on, and stops the relaunches."""

    def __init__(self):
        self.stopping = False
        self._child = None
        self._old = {}

    def __enter__(self):
        for s in (signal.SIGTERM, signal.SIGINT):
            self._old[s] = signal.signal(s, self._on_signal)
        return self

    def __exit__(self, *exc):
        for s, h in self._old.items():
            signal.signal(s, h)
        return False

    def _on_signal(self, signum, _frame):
        self.stopping = True
        if signum == signal.SIGTERM and self._child is not None and self._child.poll() is None:
            self._child.send_signal(signum)

    def run(self, args, env):
        """torchrun's exit status (128 + N when it died of signal N)."""
        self._child = subprocess.Popen([sys.executable, "-m", "torch.distributed.run", *args],
                                       env=env)
        if self.stopping:  # A SIGTERM between the caller's check and the child's start.
            self._child.send_signal(signal.SIGTERM)
        rc = self._child.wait()
        return 128 - rc if rc < 0 else rc


def main(argv=None):
    args = torchrun_argv(sys.argv[1:] if argv is None else argv)
    try:
        check_supervisable(args)
    except RelaunchError as e:
        print(f"falcon.launch: {e}", file=sys.stderr)
        return 2
    env = dict(os.environ)
    private = tempfile.mkdtemp(prefix="falcon-launch.")
    restart_file = os.path.join(private, "restart.json")
    env["FALCON_RESTART_FILE"] = restart_file
    generation = 0
    try:
        with _Torchrun() as torchrun:
            rc = 0
            while True:
                if torchrun.stopping:  # Told to stop while it prepared a relaunch.
                    print("falcon.launch: told to stop; not relaunching", file=sys.stderr)
                    return rc or 128 + signal.SIGTERM
                rc = torchrun.run(args, env)
                if not os.path.exists(restart_file) or torchrun.stopping:
                    return rc
                try:
                    request = read_restart_request(restart_file)
                    os.remove(restart_file)
                    if rc == 0:
                        print("falcon.launch: the job ended normally after leaving a restart "
                              "request; not relaunching", file=sys.stderr)
                        return 0
                    survivors = relaunch_argv(args, request)
                except (RelaunchError, OSError) as e:
                    print(f"falcon.launch: restart request: {e}", file=sys.stderr)
                    return RESTART_EXIT_CODE
                excluded = sorted(request["excluded_ranks"])
                if "layer_split" in request:
                    generation += 1
                    args = survivors
                    split_file = os.path.join(private, f"layer-split-{generation}.json")
                    try:
                        split = layout_mod.split_from_json(request["layer_split"])
                        layout_mod.write_split(split_file, split)
                    except (layout_mod.LayoutError, OSError) as e:
                        print(f"falcon.launch: S2L restart request: {e}", file=sys.stderr)
                        return RESTART_EXIT_CODE
                    env["FALCON_LAYER_SPLIT"] = split_file  # FALCON_LAYOUT, if set, stays.
                    env["FALCON_EPOCH"] = str(request.get("epoch", 0))
                    print(f"falcon.launch: S2L at iteration {request.get('iteration', 0)}: "
                          f"relaunch {generation} with the layer split "
                          f"{[list(b) for b in split.stage_blocks]} and micro-batches "
                          f"{list(split.micro_batches)} at epoch {env['FALCON_EPOCH']}: "
                          f"torchrun {' '.join(args)}", file=sys.stderr, flush=True)
                    continue
                if "layout" in request:
                    generation += 1
                    args = survivors
                    layout_file = os.path.join(private, f"layout-{generation}.json")
                    try:
                        new = layout_mod.from_json(request["layout"])
                        layout_mod.write(layout_file, new)
                    except (layout_mod.LayoutError, OSError) as e:
                        print(f"falcon.launch: S3 restart request: {e}", file=sys.stderr)
                        return RESTART_EXIT_CODE
                    env["FALCON_LAYOUT"] = layout_file
                    env.pop("FALCON_LAYER_SPLIT", None)  # The layout carries the split.
                    env["FALCON_EPOCH"] = str(request.get("epoch", 0))
                    print(f"falcon.launch: S3 at iteration {request.get('iteration', 0)}: "
                          f"relaunch {generation} in the layout DP {new.dp_size} x PP "
                          f"{new.pp_size} x TP {new.tp_size} at epoch {env['FALCON_EPOCH']}: "
                          f"torchrun {' '.join(args)}", file=sys.stderr, flush=True)
                    continue
                env.pop("FALCON_LAYOUT", None)  # S4: fewer ranks, the script's own order,
                env.pop("FALCON_LAYER_SPLIT", None)  # and the even split.
                if survivors is None:
                    print(f"falcon.launch: S4 at iteration {request.get('iteration', 0)} excluded "
                          f"this node's ranks ({excluded}): leaving the job", file=sys.stderr,
                          flush=True)
                    return 0
                generation += 1
                args = survivors
                env["FALCON_EPOCH"] = str(request.get("epoch", 0))
                print(f"falcon.launch: S4 at iteration {request.get('iteration', 0)}: relaunch "
                      f"{generation} without ranks {excluded} at epoch {env['FALCON_EPOCH']}: "
                      f"torchrun {' '.join(args)}", file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(private, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
