# Skip-or-fail for sh_test scripts that need a tool or data set the machine may lack: the shell
# twin of tests/testing/skip.h (see there for the mechanism). Source it from the test's runfiles:
#   source tests/testing/skip.sh        # data = ["//tests/testing:skip.sh"]
#   command -v promtool >/dev/null || falcon_skip_or_fail "promtool is not installed (...)"
# falcon_skip_or_fail REASON prints `FALCON-TEST-SKIPPED: REASON` (counted as skipped by
# tools/test_summary.py) and exits 0; under CI=true it prints the reason and exits 1.

falcon_skip_or_fail() {
  if [ "${CI:-}" = "true" ] || [ "${CI:-}" = "1" ]; then
    echo "FAILED: CI=true and a precondition is missing: $*" >&2
    exit 1
  fi
  echo
  echo "FALCON-TEST-SKIPPED: $*"
  exit 0
}

# falcon_skip_no_gpu REASON: the skip for a test's GPU-only part on a machine without a GPU. A GPU
# is a property of the machine's kind, not a tool a set-up could install: CI and developer
# machines have none by design, and the GPU part runs on a machine that has one. So this skip is
# reported as skipped (never passed) under CI=true too.
falcon_skip_no_gpu() {
  echo
  echo "FALCON-TEST-SKIPPED: no GPU on this machine: $*"
  exit 0
}
