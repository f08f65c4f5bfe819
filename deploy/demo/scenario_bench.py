#!/usr/bin/env python3
"""Runs each demo scenario N times on the netns cluster and prints how well Falcon did.

The benchmark behind issue-level targets (not a test): `./falcon scenario-bench [--runs 10]
[--scenarios compute,dp-link,...] [--duration 100s]`. Each run is one `falcon_demo --cluster netns
--scenario S --json-report R` (faults applied from outside the job by the kernel fault driver,
scored against its ground truth). Per scenario it prints: culprit correct k/N and cause correct
k/N (over the runs whose fault should raise an event), median alarm and verdict delays in
iterations after the fault started, the median share of the slowdown recovered next to the median
recoverable ceiling of the plan in force (the controller's prediction, Event.ceiling) and their
ratio, the median |measured mitigated / predicted - 1| (pred_err),
the strategies reached, false alarms (events no fault explains that mitigated, or named a culprit
that did not recover), unexplained slowdowns (events no fault explains that named no culprit and
mitigated nothing: load from outside the job, checked and blamed on nothing) and cleared slowdowns
(events no fault explains whose culprit recovered by itself before any mitigation) over all runs.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

DEFAULT_SCENARIOS = ["healthy", "compute", "dp-link", "link", "nic", "nic-s4", "clears",
                     "blip", "restart"]


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def fmt(v, digits=2):
    if v is None:
        return "-"
    return f"{v:.{digits}f}" if isinstance(v, float) else str(v)


def load_report(path):
    """(report, None), or (None, why) when the file is not a report.json score() can read: the
    counts it adds must be integers >= 0, the lists lists of objects."""
    try:
        with open(path) as f:
            r = json.load(f)
    except (OSError, ValueError) as e:
        return None, f"unreadable: {e}"
    if not isinstance(r, dict):
        return None, "not a JSON object"
    for key in ("false_alarms", "unexplained_slowdowns", "cleared_slowdowns"):
        v = r.get(key)
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            return None, f"{key}: {v!r} is not a count"
    for key in ("injected_faults", "events"):
        v = r.get(key)
        if not isinstance(v, list) or not all(isinstance(x, dict) for x in v):
            return None, f"{key}: not a list of objects"
        for x in v:
            if not isinstance(x.get("actions", []), list):
                return None, f"{key}[].actions: not a list"
    return r, None


def score(reports):
    """Aggregates the report.json documents of one scenario's runs."""
    out = {"runs": len(reports), "expected": 0, "culprit": 0, "cause": 0, "false_alarms": 0,
           "unexplained": 0, "cleared": 0,
           "alarm": [], "verdict": [], "recovered": [], "ceiling": [], "strategies": set(),
           "failed_runs": 0, "slowdown": [], "prediction_error": []}
    for r in reports:
        if r is None:
            out["failed_runs"] += 1
            continue
        out["false_alarms"] += r.get("false_alarms", 0)
        out["unexplained"] += r.get("unexplained_slowdowns", 0)
        out["cleared"] += r.get("cleared_slowdowns", 0)
        faults = r.get("injected_faults", [])
        for i, f in enumerate(faults):
            if not f.get("expect_event", True):
                continue
            out["expected"] += 1
            matched = [e for e in r.get("events", []) if e.get("matched_fault") == i]
            if not matched:
                continue
            e = matched[0]
            out["culprit"] += 1 if e.get("culprit_correct") else 0
            out["cause"] += 1 if e.get("cause_correct") else 0
            start = e.get("fault_start_iteration")
            out["alarm"].append(e.get("alarm_after_fault_iterations"))
            if start is not None and e.get("verdict_iteration", -1) >= 0:
                out["verdict"].append(e["verdict_iteration"] - start)
            out["recovered"].append(e.get("slowdown_recovered"))
            out["ceiling"].append(e.get("recoverable_ceiling"))
            out["prediction_error"].append(e.get("prediction_error"))
            out["slowdown"].append(e.get("slowdown_ratio"))
            for a in e.get("actions", []):
                if not a.get("revert") and not a.get("skipped"):
                    out["strategies"].add(a.get("strategy"))
    return out


def table(results):
    header = ("scenario", "runs", "culprit", "cause", "alarm_it", "verdict_it", "slowdown",
              "recovered", "ceiling", "rec/ceil", "pred_err", "strategies", "false_alarms",
              "unexplained", "cleared")
    rows = [header]
    for name, s in results.items():
        n = s["expected"]
        rec, ceil = median(s["recovered"]), median(s["ceiling"])
        rows.append((
            name,
            f'{s["runs"] - s["failed_runs"]}/{s["runs"]}',
            f'{s["culprit"]}/{n}' if n else "-",
            f'{s["cause"]}/{n}' if n else "-",
            fmt(median(s["alarm"])),
            fmt(median(s["verdict"])),
            fmt(median(s["slowdown"])),
            fmt(rec),
            fmt(ceil),
            fmt(rec / ceil) if rec is not None and ceil else "-",
            fmt(median([abs(x) for x in s["prediction_error"] if x is not None])),
            ",".join(sorted(x for x in s["strategies"] if x)) or "-",
            str(s["false_alarms"]),
            str(s["unexplained"]),
            str(s["cleared"]),
        ))
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in rows)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=10)
    p.add_argument("--scenarios", default=",".join(DEFAULT_SCENARIOS))
    p.add_argument("--duration", default="100s", help="falcon_demo --duration of each run")
    p.add_argument("--demo", required=True, help="the falcon_demo binary")
    p.add_argument("--out", default="", help="keep the runs' report.json files here")
    p.add_argument("--cluster", default="netns", choices=["netns", "loopback"])
    p.add_argument("--s2l", action="store_true", help="falcon_demo --s2l: let S2L run")
    args = p.parse_args()
    if args.runs < 1:
        sys.exit("scenario_bench: --runs must be >= 1")
    out = args.out or tempfile.mkdtemp(prefix="falcon-scenario-bench.")
    os.makedirs(out, exist_ok=True)
    results = {}
    for name in [s for s in args.scenarios.split(",") if s]:
        reports = []
        for i in range(args.runs):
            path = os.path.join(out, f"{name}-{i}.json")
            cmd = [args.demo, "--scenario", name, "--cluster", args.cluster, "--duration",
                   args.duration, "--out", os.path.join(out, f"{name}-{i}"), "--json-report", path]
            if args.s2l:
                cmd.append("--s2l")
            print(f"scenario_bench: {name} run {i + 1}/{args.runs}", flush=True)
            proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            if proc.returncode != 0 or not os.path.exists(path):
                print(f"scenario_bench: {name} run {i + 1} failed (exit {proc.returncode}): "
                      f"{proc.stderr.strip()[-400:]}", flush=True)
                reports.append(None)
                continue
            report, error = load_report(path)
            if error:
                print(f"scenario_bench: {name} run {i + 1}: {path}: {error}; counted as failed",
                      flush=True)
            reports.append(report)
        results[name] = score(reports)
        print(table({name: results[name]}), flush=True)
    print(f"\n=== scenario bench ({args.cluster} cluster, {args.runs} runs each, reports in {out})")
    print(table(results))


if __name__ == "__main__":
    main()
