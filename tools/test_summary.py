#!/usr/bin/env python3
"""Counts test results from Bazel Build Event Protocol JSON files and prints the CI line.

Usage: test_summary.py [--extra NAME=PASSED|FAILED|SKIPPED ...] BEP.json[:VARIANT] ...

A target whose `targetConfigured` event carries `configured.testSize` is a test. Its status comes
from `testSummary.overallStatus` (PASSED and FLAKY count as passed; NO_STATUS counts as skipped
and so does a test skipped as incompatible with the variant, e.g. CUDA-only under --config=nocuda); a test without a summary whose
`targetCompleted` failed counts as FAILED_TO_BUILD. Extra results (format check, scripts) are added
with --extra. Failures go to stderr; the last line on stdout is `N passed, N failed[, N skipped]`.
Exit status: 1 when anything failed, or when nothing ran at all.
"""
import json
import sys


def read_bep(path):
    tests, summaries, completed = set(), {}, {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                ev = json.loads(line)
            except json.JSONDecodeError:
                continue
            eid = ev.get("id", {})
            if "targetConfigured" in eid and "testSize" in ev.get("configured", {}):
                tests.add(eid["targetConfigured"]["label"])
            elif "testSummary" in eid:
                summaries[eid["testSummary"]["label"]] = ev.get("testSummary", {}).get(
                    "overallStatus", "NO_STATUS")
            elif "targetCompleted" in eid:
                label = eid["targetCompleted"]["label"]
                if ev.get("aborted", {}).get("reason") == "SKIPPED":
                    completed[label] = "SKIPPED"  # incompatible with this variant
                else:
                    completed[label] = ev.get("completed", {}).get("success", False)
    results = {}
    for label in tests:
        if label in summaries:
            status = summaries[label]
        elif completed.get(label) == "SKIPPED":
            status = "NO_STATUS"
        elif label in completed and not completed[label]:
            status = "FAILED_TO_BUILD"
        elif label not in completed:
            status = "NOT_BUILT"
        else:
            status = "NO_STATUS"
        results[label] = status
    return results


def main(argv):
    passed = failed = skipped = 0
    extras = []
    files = []
    i = 0
    while i < len(argv):
        if argv[i] == "--extra":
            extras.append(argv[i + 1])
            i += 2
        else:
            files.append(argv[i])
            i += 1
    for spec in files:
        path, _, variant = spec.partition(":")
        try:
            results = read_bep(path)
        except OSError as e:
            print(f"test_summary: cannot read {path}: {e}", file=sys.stderr)
            failed += 1
            continue
        for label, status in sorted(results.items()):
            name = f"{label} [{variant}]" if variant else label
            if status in ("PASSED", "FLAKY"):
                passed += 1
            elif status == "NO_STATUS":
                skipped += 1
            else:
                failed += 1
                print(f"FAILED: {name}: {status}", file=sys.stderr)
    for extra in extras:
        name, _, status = extra.partition("=")
        if status == "PASSED":
            passed += 1
        elif status == "SKIPPED":
            skipped += 1
        else:
            failed += 1
            print(f"FAILED: {name}", file=sys.stderr)
    line = f"{passed} passed, {failed} failed"
    if skipped:
        line += f", {skipped} skipped"
    print(line)
    return 1 if failed or passed == 0 else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
