#!/usr/bin/python3
"""docs/architecture.md#metric-conventions names only prefixes and labels the daemons export.

usage: check_metric_conventions.py ARCHITECTURE_MD METRICS_MD

METRICS_MD is the metrics reference printed from the metric tables (//tools/metrics_doc). Every
`falcon_<daemon>_` prefix the conventions name must start some metric, and the label names they
list (the backticked names after "label names", up to the ";") must be exactly the labels the
tables declare.
"""

import re
import sys

ROW = re.compile(r"^\|\s*`(falcon_[a-z0-9_]+)`\s*\|\s*(?:counter|gauge|histogram)\s*\|[^|]*\|([^|]*)\|",
                 re.M)


def problems(architecture, metrics):
    out = []
    m = re.search(r"^## Metric conventions\n(.*?)(?=^## |\Z)", architecture, re.M | re.S)
    if not m:
        return ["architecture.md has no '## Metric conventions' section"]
    section = " ".join(m.group(1).split())
    names, labels = set(), set()
    for name, label_cell in ROW.findall(metrics):
        names.add(name)
        labels.update(l.strip() for l in label_cell.split(",") if l.strip())
    if not names:
        return ["no metric rows in the metrics reference"]
    for prefix in re.findall(r"`(falcon_[a-z]+_)`", section):
        if not any(n.startswith(prefix) for n in names):
            out.append(f"prefix {prefix}: no metric has it")
    listed = re.search(r"label names (.*?);", section)
    if not listed:
        return out + ["the conventions list no 'label names ...;'"]
    named = set(re.findall(r"`([a-z_]+)`", listed.group(1)))
    for label in sorted(named - labels):
        out.append(f"label {label}: no metric has it")
    for label in sorted(labels - named):
        out.append(f"label {label}: exported but not in the conventions")
    return out


def main(argv):
    with open(argv[1], encoding="utf-8") as f:
        architecture = f.read()
    with open(argv[2], encoding="utf-8") as f:
        metrics = f.read()
    found = problems(architecture, metrics)
    for p in found:
        print(f"FAIL: docs/architecture.md#metric-conventions: {p}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
