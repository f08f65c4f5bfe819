#!/usr/bin/env python3
"""Checks that Prometheus rule files and Grafana dashboards only use metric names Falcon exports.

usage: check_metric_names.py --metrics METRICS.md... [--rules RULES.yml...] [--dashboard D.json...]
       [--exprs FILE...] [--emit_rules OUT.yml]

Exported names are the rows of the metrics reference (docs/metrics.md, printed by
//tools/metrics_doc from the daemons' metric tables: controller/metrics/metric_table.h and
agent/agent_metrics_table.h), so this script holds no metric name of its own; a histogram's
_bucket/_sum/_count series count as exported. Recorded
names (with ':') must be defined by a `record:` in one of the --rules files. --exprs files are
rule or rule-test files (their expr: and series: values are checked); --dashboard files must parse as Grafana dashboard JSON, every panel
target needs an `expr`, and their expressions are checked. Exits 1 listing every unknown name.
"""
import argparse
import json
import re
import sys

TOKEN = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")
LABELS = {"falcon_job"}  # Label names that start with falcon_ (prometheus.yml relabelling).
SUFFIXES = ("_bucket", "_sum", "_count")


ROW = re.compile(r"^\|\s*`(falcon_[a-z0-9_]+)`\s*\|\s*(counter|gauge|histogram)\s*\|", re.M)


def exported(tables):
    """Names of the metrics reference's table rows; a histogram adds its three series."""
    names = set()
    for path in tables:
        with open(path, encoding="utf-8") as f:
            for name, kind in ROW.findall(f.read()):
                names.add(name)
                if kind == "histogram":
                    names.update(name + s for s in SUFFIXES)
    return names


def recorded(rule_files):
    names = set()
    for path in rule_files:
        with open(path, encoding="utf-8") as f:
            names.update(re.findall(r"^\s*-?\s*record:\s*([A-Za-z_:][A-Za-z0-9_:]*)", f.read(), re.M))
    return names


def unknown_in(text, known, records):
    bad = set()
    for m in TOKEN.finditer(text):
        name = m.group(0)
        if not name.startswith("falcon_") or name in LABELS:
            continue
        rest = text[m.end():].lstrip()
        if rest.startswith(("=", "!=")):  # A label name in a matcher.
            continue
        if ":" in name:
            if name not in records:
                bad.add(name)
            continue
        if name not in known:
            bad.add(name)
    return bad


def yaml_exprs(text):
    """The values of `expr:` and `series:` keys of a rule or rule-test file (plain or block)."""
    out = []
    lines = text.splitlines()
    key = re.compile(r"^(\s*)(?:-\s+)?(expr|series):\s*(.*)$")
    for i, line in enumerate(lines):
        m = key.match(line)
        if not m:
            continue
        indent, value = len(m.group(1)), m.group(3).strip()
        if value in ("", ">", ">-", "|", "|-"):
            block = []
            for nxt in lines[i + 1:]:
                if nxt.strip() and len(nxt) - len(nxt.lstrip()) <= indent:
                    break
                block.append(nxt.strip())
            value = " ".join(block)
        out.append(value.strip("'\""))
    return out


def dashboard_exprs(path):
    with open(path, encoding="utf-8") as f:
        d = json.load(f)
    errors, exprs = [], []
    if not isinstance(d.get("panels"), list) or not d["panels"]:
        errors.append(f"{path}: no panels")
    if not d.get("title") or not d.get("uid"):
        errors.append(f"{path}: title and uid are required")

    def walk(panels):
        for p in panels:
            if p.get("type") == "row":
                walk(p.get("panels", []))
                continue
            targets = p.get("targets") or []
            if not targets:
                errors.append(f"{path}: panel '{p.get('title')}' has no targets")
            for t in targets:
                if not t.get("expr"):
                    errors.append(f"{path}: panel '{p.get('title')}' has a target without expr")
                else:
                    exprs.append((p.get("title"), t["expr"]))

    walk(d.get("panels", []))
    for v in d.get("templating", {}).get("list", []):
        q = v.get("query")
        if isinstance(q, dict):
            q = q.get("query")
        if v.get("type") == "query" and isinstance(q, str):
            exprs.append((f"variable {v.get('name')}", q))
    return exprs, errors


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--metrics", nargs="+", required=True,
                    help="metrics reference markdown (docs/metrics.md or its generated copy)")
    ap.add_argument("--rules", nargs="*", default=[])
    ap.add_argument("--exprs", nargs="*", default=[])
    ap.add_argument("--dashboard", nargs="*", default=[])
    ap.add_argument("--emit_rules", help="write the dashboard expressions (Grafana variables "
                    "substituted) as a rule file, for `promtool check rules`")
    a = ap.parse_args()
    known = exported(a.metrics)
    if len(known) < 10:
        print(f"FAIL: only {len(known)} metric names found in {a.metrics}", file=sys.stderr)
        return 1
    records = recorded(a.rules)
    errors = []
    checked = 0
    for path in a.exprs:
        with open(path, encoding="utf-8") as f:
            exprs = yaml_exprs(f.read())
        if not exprs:
            errors.append(f"{path}: no expr or series found")
        for expr in exprs:
            for name in sorted(unknown_in(expr, known, records)):
                errors.append(f"{path}: unknown metric {name} in {expr!r}")
            checked += 1
    for path in a.dashboard:
        try:
            exprs, errs = dashboard_exprs(path)
        except (OSError, ValueError) as e:
            errors.append(f"{path}: does not parse: {e}")
            continue
        errors.extend(errs)
        for title, expr in exprs:
            for name in sorted(unknown_in(expr, known, records)):
                errors.append(f"{path}: panel '{title}': unknown metric {name} in {expr!r}")
            checked += 1
    if a.emit_rules:
        subst = {"$__rate_interval": "5m", "$__range": "1h", "$__interval": "1m", "$job": ".*"}
        with open(a.emit_rules, "w", encoding="utf-8") as f:
            f.write("groups:\n  - name: dashboard\n    rules:\n")
            for path in a.dashboard:
                for i, (_, expr) in enumerate(dashboard_exprs(path)[0]):
                    if expr.startswith("label_values("):  # Grafana's, not PromQL.
                        continue
                    for k, v in subst.items():
                        expr = expr.replace(k, v)
                    f.write(f"      - record: dashboard:expr_{i}\n        expr: {json.dumps(expr)}\n")
    for e in errors:
        print("FAIL:", e, file=sys.stderr)
    if errors:
        return 1
    print(f"PASS: {checked} files/expressions use only the {len(known)} exported metric names")
    return 0


if __name__ == "__main__":
    sys.exit(main())
