#!/usr/bin/env python3
"""Counts test results from Bazel Build Event Protocol JSON files and prints the CI line.

Usage: test_summary.py [--extra NAME=PASSED|FAILED|SKIPPED[:REASON] ...] BEP.json[:VARIANT] ...

A target whose `targetConfigured` event carries `configured.testSize` is a test. Its status comes
from `testSummary.overallStatus`: PASSED counts as passed; FLAKY (passed only on a retry) counts
as failed, since a test must hold on every run; NO_STATUS counts as skipped, and so does a test
skipped as incompatible with the variant (e.g. CUDA-only under --config=nocuda). A test without a
summary whose `targetCompleted` failed counts as FAILED_TO_BUILD.

A test that passed but printed a line starting with `FALCON-TEST-SKIPPED: ` (tests/testing/skip.h
and skip.sh: its tool or data set is missing) in its test.log counts as skipped, with that reason.
The logs are found through the `testResult` events' `testActionOutput` (file:// URIs).

A failed test's excerpt (its test.log's failure lines, e.g. gtest's `file:line: Failure` with the
lines that follow, then the log's last lines; at most EXCERPT_LINES) is printed under its FAILED
line, so the reason survives when only the end of the CI output is kept.

Extra results (format check, scripts) are added with --extra. Failures go to stderr; skipped tests
with their reasons, and the five slowest tests (seconds over all attempts, to keep the suite's
time in check), to stdout; the last line on stdout is `N passed, N failed, N skipped`.
Exit status: 1 when anything failed, or when nothing ran at all.
"""
import json
import sys
import urllib.parse
import urllib.request

SKIP_MARKER = "FALCON-TEST-SKIPPED: "
FAILURE_MARKERS = ("Failure", "[  FAILED  ]", "Check failed", "FAIL:", "Traceback", "Error:",
                   "-- Test timed out")
EXCERPT_LINES = 24


def log_path(uri):
    """Local path of a file:// URI, or None."""
    parsed = urllib.parse.urlparse(uri)
    if parsed.scheme != "file":
        return None
    return urllib.request.url2pathname(parsed.path)


def skip_reasons(path):
    """The reasons of the skip marker lines in one test.log (empty when none or unreadable)."""
    reasons = []
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith(SKIP_MARKER):
                    reasons.append(line[len(SKIP_MARKER):].strip())
    except OSError:
        pass
    return reasons


def failure_excerpt(path, limit=EXCERPT_LINES):
    """Up to `limit` lines of one test.log that say why it failed: each line holding a failure
    marker with the two lines after it (first ones first, at most half the limit), then the last
    lines of the log. Empty when the log is unreadable."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = [line.rstrip("\n") for line in f]
    except OSError:
        return []
    picked = []
    for i, line in enumerate(lines):
        if len(picked) >= limit // 2:
            break
        if any(m in line for m in FAILURE_MARKERS):
            for j in range(i, min(i + 3, len(lines))):
                if j not in picked:
                    picked.append(j)
    picked = picked[:limit // 2]
    tail_start = max(len(lines) - (limit - len(picked)), picked[-1] + 1 if picked else 0)
    out = [lines[j] for j in picked]
    if picked and tail_start > picked[-1] + 1:
        out.append("...")
    out.extend(lines[tail_start:])
    return out


def read_bep(path):
    """Returns {label: (status, [skip reasons], seconds, [test.log paths])} for every test target in
    one BEP file."""
    tests, summaries, completed, logs, seconds = set(), {}, {}, {}, {}
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
                summary = ev.get("testSummary", {})
                label = eid["testSummary"]["label"]
                summaries[label] = summary.get("overallStatus", "NO_STATUS")
            elif "testResult" in eid:
                label = eid["testResult"]["label"]
                result = ev.get("testResult", {})
                for out in result.get("testActionOutput", []):
                    if out.get("name") == "test.log":
                        logs.setdefault(label, []).append(out.get("uri", ""))
                ms = int(result.get("testAttemptDurationMillis", 0) or 0)
                seconds[label] = seconds.get(label, 0) + ms / 1000
            elif "targetCompleted" in eid:
                label = eid["targetCompleted"]["label"]
                if ev.get("aborted", {}).get("reason") == "SKIPPED":
                    completed[label] = "SKIPPED"  # incompatible with this variant
                else:
                    completed[label] = ev.get("completed", {}).get("success", False)
    results = {}
    for label in tests:
        reasons = []
        if label in summaries:
            status = summaries[label]
        elif completed.get(label) == "SKIPPED":
            status = "NO_STATUS"
            reasons = ["incompatible with this variant"]
        elif label in completed and not completed[label]:
            status = "FAILED_TO_BUILD"
        elif label not in completed:
            status = "NOT_BUILT"
        else:
            status = "NO_STATUS"
        if status == "PASSED":
            for uri in logs.get(label, []):
                p = log_path(uri)
                if p is not None:
                    reasons.extend(skip_reasons(p))
            if reasons:
                status = "SKIPPED"
        paths = [p for p in (log_path(uri) for uri in logs.get(label, [])) if p is not None]
        results[label] = (status, sorted(set(reasons)), seconds.get(label, 0), paths)
    return results


def main(argv):
    passed = failed = skipped = 0
    timings = []
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
        for label, (status, reasons, seconds, paths) in sorted(results.items()):
            name = f"{label} [{variant}]" if variant else label
            if seconds >= 0.05:  # a cached result reports a few milliseconds
                timings.append((seconds, name))
            if status == "PASSED":
                passed += 1
            elif status in ("NO_STATUS", "SKIPPED"):
                skipped += 1
                print(f"SKIPPED: {name}: {'; '.join(reasons) or 'not run'}")
            else:
                failed += 1
                extra = " (passed only on a retry: flaky)" if status == "FLAKY" else ""
                print(f"FAILED: {name}: {status}{extra}", file=sys.stderr)
                if paths:  # the last attempt's log
                    for line in failure_excerpt(paths[-1]):
                        print(f"    {line}", file=sys.stderr)
    for extra in extras:
        name, _, rest = extra.partition("=")
        status, _, reason = rest.partition(":")
        if status == "PASSED":
            passed += 1
        elif status == "SKIPPED":
            skipped += 1
            print(f"SKIPPED: {name}: {reason or 'not run'}")
        else:
            failed += 1
            print(f"FAILED: {name}", file=sys.stderr)
    if timings:
        slowest = sorted(timings, key=lambda t: (-t[0], t[1]))[:5]
        print("slowest: " + ", ".join(f"{name} {sec:.1f}s" for sec, name in slowest))
    print(f"{passed} passed, {failed} failed, {skipped} skipped")
    return 1 if failed or passed == 0 else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
