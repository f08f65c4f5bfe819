#!/usr/bin/env bash
# tests/testing/skip.sh: skips with the marker line (exit 0) outside CI, fails (exit 1) under CI;
# a missing GPU is skipped in both.
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
# A missing GPU is skipped in and out of CI (CI machines have none by design).
for v in true unset; do
  if [ "$v" = unset ]; then envarg=(-u CI); else envarg=(CI=$v); fi
  out="$(env "${envarg[@]}" bash -c 'source "$0"; falcon_skip_no_gpu "cudaErrorNoDevice"; echo after' \
    "$SKIP" 2>&1)"; rc=$?
  [ "$rc" = 0 ] || fail "no GPU, CI=$v: exit $rc, want 0: $out"
  grep -qx "FALCON-TEST-SKIPPED: no GPU on this machine: cudaErrorNoDevice" <<<"$out" ||
    fail "no GPU, CI=$v: no marker line: $out"
  grep -q after <<<"$out" && fail "no GPU, CI=$v: did not stop the script: $out"
done
echo PASS
