#!/usr/bin/env python3
"""Measures how much of a compute fail-slow each S2L plan near the planner's really recovers.

The benchmark behind the recoverable ceiling (not a test): `./falcon plan-sweep [--runs 3]
[--dp 4 --pp 2 --layers 16 --micro-batches 64 --rank 2 --slowdown 1.5]`. One run is one
standalone `falcon_train` job (no controller: the plans come from a directive script) whose rank
`--rank` computes `--slowdown` x slower from the end of a healthy segment on (an in-process fault
on its emulated device, exactly that factor). The job runs in segments of `--segment` iterations:
healthy, slowed, then each candidate plan in turn (a layer split with its micro-batches, applied
live), slowed again and healthy again. The candidates are the plan the layer split planner picks
(`falcon_plan layer-split`, the controller's S2L planner) and its neighbours: the slow stage one
block lighter or heavier, and the slow rank's DP group one micro-batch more or fewer (the rest
spread evenly), plus the even split with the planned micro-batches (what the split itself adds).

Per candidate it prints the median iteration time and the recovered share
(t_slow - t_plan) / (t_slow - t_healthy), with t_healthy and t_slow the means of the segments
before and after the candidates (the machine drifts); over the runs, the median share of each
candidate, the best one measured, and where the planner's pick ranks. The first iterations of
every segment (--settle) are left out: they include the split's move.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile


def even_counts(total, parts):
    """`total` split into `parts` counts that differ by at most one, larger first (how a
    candidate spreads the rest of the micro-batches; not the job's even split, which main()
    makes exact: --layers a multiple of --pp, --micro-batches of --dp x --pp)."""
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


def micro_batches_with(dp, total, dp_index, mine):
    """Micro-batches per DP group: `mine` for `dp_index`, the rest spread evenly over the others;
    None when that leaves another group none."""
    rest = total - mine
    if mine < 1 or dp < 2 and rest != 0 or dp >= 2 and rest < dp - 1:
        return None
    others = even_counts(rest, dp - 1) if dp > 1 else []
    return others[:dp_index] + [mine] + others[dp_index:]


def candidates(planned, dp, pp, layers, total, dp_index, stage):
    """The planner's plan and its neighbours, without repeats: (name, split, micro_batches) with
    split the blocks of each stage per DP group. `planned` is (split, micro_batches)."""
    split, m = planned
    out, seen = [], set()

    def add(name, s, mbs):
        if mbs is None or any(b < 1 for stages in s for b in stages):
            return
        key = (json.dumps(s), json.dumps(mbs))
        if key in seen:
            return
        seen.add(key)
        out.append((name, s, mbs))

    add("planned", split, m)
    mine = split[dp_index][stage]
    for delta in (-1, 1):
        s = [list(stages) for stages in split]
        peer = stage + 1 if stage + 1 < pp else stage - 1
        s[dp_index][stage] = mine + delta
        s[dp_index][peer] -= delta
        add(f"slow stage {mine + delta} blocks", s, m)
    for delta in (-1, 1):
        add(f"slow group {m[dp_index] + delta} micro-batches", split,
            micro_batches_with(dp, total, dp_index, m[dp_index] + delta))
    even = [[layers // pp] * pp for _ in range(dp)]
    add("even split, same micro-batches", even, m)
    return out


def directive_script(cands, dp, pp, layers, total, first_iteration, segment):
    """The scripted directives (trainer/directives/scripted_hooks.h) that apply each candidate for
    `segment` iterations from `first_iteration` on, then the even split; and the segments:
    (name, from, to) for each candidate and the slowed segment after them."""
    lines, segments = [], []
    it = first_iteration
    for version, (name, split, m) in enumerate(cands, start=1):
        lines.append({"directive": {
            "directive_id": version, "effective_iteration": it, "plan_version": version,
            "layer_split": {"replicas": [{"stage_blocks": s} for s in split],
                            "micro_batches": m}}})
        segments.append((name, it, it + segment))
        it += segment
    even = [{"stage_blocks": [layers // pp] * pp} for _ in range(dp)]
    lines.append({"directive": {
        "directive_id": len(cands) + 1, "effective_iteration": it,
        "plan_version": len(cands) + 1,
        "layer_split": {"replicas": even, "micro_batches": [total // dp] * dp}}})
    segments.append(("slowed (after)", it, it + segment))
    return lines, segments


def segment_times(rows, segments, settle):
    """Median iteration time of each segment (rank 0's rows of the JSON log), the first `settle`
    iterations of each left out; None for a segment with no row left."""
    by_iteration = {r["iteration"]: r["iteration_time_s"] for r in rows if r.get("rank") == 0}
    out = {}
    for name, first, end in segments:
        times = [by_iteration[i] for i in range(first + settle, end) if i in by_iteration]
        out[name] = statistics.median(times) if times else None
    return out


def shares(times, candidate_names):
    """Recovered share of each candidate against the healthy and slowed segments' means: a dict,
    None where a time is missing or the slowdown is not positive."""
    healthy = [times.get("healthy"), times.get("healthy (after)")]
    slowed = [times.get("slowed"), times.get("slowed (after)")]
    if None in healthy or None in slowed:
        return {name: None for name in candidate_names}
    h, s = sum(healthy) / 2, sum(slowed) / 2
    if s <= h:
        return {name: None for name in candidate_names}
    return {name: (s - times[name]) / (s - h) if times.get(name) is not None else None
            for name in candidate_names}


def planner_pick(falcon_plan, dp, pp, layers, total, rank, slowdown):
    """(split, micro_batches) that `falcon_plan layer-split` picks for rank `rank` (placed as the
    trainer places it: DP index rank % dp, stage rank // dp) slowed x`slowdown`."""
    dp_index, stage = rank % dp, rank // dp
    cmd = [falcon_plan, "layer-split", f"--dp={dp}", f"--pp={pp}", f"--layers={layers}",
           "--layer-compute-s=0.001", f"--micro-batches={total}",
           f"--slow-cells={dp_index}.{stage}:{slowdown}", "--p2p-s=0", "--allreduce-s=0",
           "--json"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    plan = json.loads(out)
    split, m = [], []
    for r in sorted(plan["replicas"], key=lambda r: r["dp"]):
        firsts = list(r["first_layer"]) + [layers]
        split.append([firsts[i + 1] - firsts[i] for i in range(pp)])
        m.append(r["micro_batches"])
    return split, m


def run_once(args, cands, workdir, index):
    healthy_end = args.segment * 2  # A longer healthy start: the job warms up.
    slowed_end = healthy_end + args.segment
    lines, segments = directive_script(cands, args.dp, args.pp, args.layers, args.micro_batches,
                                       slowed_end, args.segment)
    fault_end = segments[-1][2]
    steps = fault_end + args.segment
    segments = [("healthy", 0, healthy_end), ("slowed", healthy_end, slowed_end)] + segments + [
        ("healthy (after)", fault_end, steps)]
    script = os.path.join(workdir, f"directives-{index}.jsonl")
    with open(script, "w") as f:
        f.write("".join(json.dumps(line) + "\n" for line in lines))
    log = os.path.join(workdir, f"train-{index}.jsonl")
    cmd = [args.train, f"--dp={args.dp}", f"--pp={args.pp}", f"--nodes={args.dp}",
           f"--micro_batches={args.micro_batches}", f"--steps={steps}",
           f"--layers={args.layers}", f"--emulated_compute_ms={args.compute_ms}",
           "--hidden=32", "--embed=16", "--batch=8", "--emulated_device_duty=0.1",
           "--noburn_compute_faults", "--print_every=0", f"--json_log={log}",
           f"--directives={script}",
           f"--faults=compute:rank={args.rank},factor={args.slowdown},"
           f"from={healthy_end},to={fault_end}"]
    if args.cluster:
        cmd.append(f"--cluster={args.cluster}")
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"plan_sweep: falcon_train failed (exit {proc.returncode}): "
                 f"{proc.stderr.strip()[-2000:]}")
    with open(log) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    return segment_times(rows, segments, args.settle)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--train", required=True,
                   help="the falcon_train binary (./falcon plan-sweep passes it)")
    p.add_argument("--plan", required=True,
                   help="the falcon_plan binary (./falcon plan-sweep passes it)")
    p.add_argument("--runs", type=int, default=3, help="jobs to run (the medians are over them)")
    p.add_argument("--dp", type=int, default=4, help="DP groups")
    p.add_argument("--pp", type=int, default=2, help="pipeline stages")
    p.add_argument("--layers", type=int, default=16, help="blocks of the model")
    p.add_argument("--micro-batches", type=int, default=64, help="micro-batches per iteration")
    p.add_argument("--rank", type=int, default=2,
                   help="the slow rank (DP group rank %% dp, stage rank // dp)")
    p.add_argument("--slowdown", type=float, default=1.5, help="its device's slowdown, (1, 10]")
    p.add_argument("--compute-ms", type=float, default=5.0,
                   help="emulated compute per micro-batch of a whole even stage (the demo's)")
    p.add_argument("--segment", type=int, default=12, help="iterations per segment")
    p.add_argument("--settle", type=int, default=3, help="iterations left out per segment")
    p.add_argument("--cluster", default="",
                   help="run the ranks on this cluster (a netns cluster.json: falcon_netns create "
                        "--detach); default: loopback")
    p.add_argument("--out", default="", help="also write the figures as JSON here")
    args = p.parse_args(argv)
    checks = [(args.runs >= 1, "--runs must be >= 1"),
              (args.dp >= 1 and args.pp >= 2, "--dp must be >= 1 and --pp >= 2"),
              # The job's even split is then the same by every rule (common::EvenStageBlocks,
              # the trainer's even micro-batch plan), and the last segment restores it exactly.
              (args.layers > args.pp and args.layers % args.pp == 0,
               f"--layers {args.layers} must be a multiple of --pp {args.pp} above it"),
              (args.micro_batches % (args.dp * args.pp) == 0 and args.micro_batches > 0,
               f"--micro-batches {args.micro_batches} must be a multiple of --dp x --pp "
               f"({args.dp * args.pp})"),
              (0 <= args.rank < args.dp * args.pp,
               f"--rank {args.rank} is not a rank of the job: [0, {args.dp * args.pp})"),
              (not args.cluster or os.path.isfile(args.cluster),
               f"--cluster {args.cluster}: no such file"),
              (1.0 < args.slowdown <= 10.0, "--slowdown must be in (1, 10]"),
              (args.compute_ms > 0, "--compute-ms must be > 0"),
              (0 <= args.settle < args.segment, "--settle must be in [0, --segment)")]
    for ok, why in checks:
        if not ok:
            sys.exit(f"plan_sweep: {why}")
    planned = planner_pick(args.plan, args.dp, args.pp, args.layers, args.micro_batches,
                           args.rank, args.slowdown)
    cands = candidates(planned, args.dp, args.pp, args.layers, args.micro_batches,
                       args.rank % args.dp, args.rank // args.dp)
    names = [c[0] for c in cands]
    print(f"plan_sweep: DP {args.dp} x PP {args.pp}, {args.layers} blocks, {args.micro_batches} "
          f"micro-batches; rank {args.rank} (DP group {args.rank % args.dp}, stage "
          f"{args.rank // args.dp}) x{args.slowdown}; {len(cands)} candidates of {args.segment} "
          f"iterations each; {args.cluster or 'loopback'}. Run it on an otherwise idle machine: "
          f"outside load moves the shares.", flush=True)
    per_run = []
    with tempfile.TemporaryDirectory(prefix="plan-sweep-") as workdir:
        for i in range(args.runs):
            print(f"plan_sweep: run {i + 1}/{args.runs}", flush=True)
            times = run_once(args, cands, workdir, i)
            per_run.append({"times_s": times, "shares": shares(times, names)})
            print(f"  healthy {times['healthy']:.4f} s, slowed {times['slowed']:.4f} s; after: "
                  f"healthy {times['healthy (after)']:.4f} s, slowed "
                  f"{times['slowed (after)']:.4f} s", flush=True)
            h = (times["healthy"] + times["healthy (after)"]) / 2
            s = (times["slowed"] + times["slowed (after)"]) / 2
            if s < 1.05 * h:
                print(f"  warning: the job slowed only x{s / h:.3f}: the shares of this run are "
                      f"noise (give the slow rank more of the iteration: more --compute-ms, "
                      f"--micro-batches or --slowdown)", flush=True)
    print(f"\n{'candidate':34} {'split of the slow pipeline':>26} {'micro-batches':>18} "
          f"{'median share':>13} {'per run':>s}")
    summary = []
    for name, split, m in cands:
        values = [r["shares"][name] for r in per_run if r["shares"][name] is not None]
        med = statistics.median(values) if values else None
        summary.append({"candidate": name, "split": split, "micro_batches": m,
                        "median_share": med, "shares": values})
        stages = "+".join(str(b) for b in split[args.rank % args.dp])
        print(f"{name:34} {stages:>26} {','.join(map(str, m)):>18} "
              f"{'-' if med is None else f'{med:.3f}':>13} "
              f"{' '.join(f'{v:.3f}' for v in values)}")
    measured = [s for s in summary if s["median_share"] is not None]
    if measured:
        best = max(measured, key=lambda s: s["median_share"])
        rank = sorted((s["median_share"] for s in measured), reverse=True).index(
            summary[0]["median_share"]) + 1 if summary[0]["median_share"] is not None else None
        print(f"\nbest measured: {best['candidate']} ({best['median_share']:.3f}); the planner's "
              f"pick ranks {rank if rank else '-'} of {len(measured)}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"settings": vars(args), "candidates": summary, "runs": per_run}, f,
                      indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
