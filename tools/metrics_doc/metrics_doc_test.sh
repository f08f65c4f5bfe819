#!/usr/bin/env bash
# docs/metrics.md is what //tools/metrics_doc prints from the metric tables.
# usage: metrics_doc_test.sh GENERATED COMMITTED
set -euo pipefail
if ! diff -u "$2" "$1"; then
  echo "FAIL: docs/metrics.md differs from the metric tables; regenerate it with" >&2
  echo "  bazel run //tools/metrics_doc > docs/metrics.md" >&2
  exit 1
fi
grep -q '^| `falcon_controller_events` | gauge |' "$1" || { echo "FAIL: no controller table" >&2; exit 1; }
grep -q '^| `falcon_agent_errors_total` | counter |' "$1" || { echo "FAIL: no agent table" >&2; exit 1; }
echo PASS
