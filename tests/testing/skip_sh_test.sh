#!/usr/bin/env bash
# tests/testing/skip.sh: skips with the marker line (exit 0) outside CI, fails (exit 1) under CI.
set -uo pipefail
SKIP="$(pwd)/tests/testing/skip.sh"
fail() { echo "FAIL: $*" >&2; exit 1; }
run() { env "$@" bash -c 'source "$0"; falcon_skip_or_fail "tool x is not installed"; echo after' \
  "$SKIP" 2>&1; }

out="$(run -u CI)"; rc=$?
[ "$rc" = 0 ] || fail "outside CI: exit $rc, want 0: $out"
grep -qx "FALCON-TEST-SKIPPED: tool x is not installed" <<<"$out" || fail "no marker line: $out"
grep -q after <<<"$out" && fail "did not stop the script: $out"

for v in true 1; do
  out="$(run CI=$v)"; rc=$?
  [ "$rc" = 1 ] || fail "CI=$v: exit $rc, want 1: $out"
  grep -q "FALCON-TEST-SKIPPED" <<<"$out" && fail "CI=$v: marker printed: $out"
  grep -q "tool x is not installed" <<<"$out" || fail "CI=$v: reason missing: $out"
done

out="$(run CI=false)"; rc=$?
[ "$rc" = 0 ] || fail "CI=false: exit $rc, want 0"
echo PASS
