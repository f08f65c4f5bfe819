#!/usr/bin/env bash
# Runs the collective op checks against the NCCL backend on this machine's GPUs: the same checks
# the Gloo tests run (collective/testing/op_conformance.h: every op, uneven counts, splits),
# with device timing on, plus a dead-rank check and the GPU paths of the unit tests.
#
# Usage: tests/gpu/run_collective_gpu.sh [MAX_RANKS]
#   MAX_RANKS  largest world to try (default 8). NCCL allows one rank per GPU, so worlds of
#              1, 2, 4, 8 ranks run while they fit on the visible GPUs.
# Env: FALCON_BIN=DIR  use prebuilt falcon_launch and collective_op_check from DIR instead of
#                      building them with Bazel.
# Exit: 0 all passed, 1 a check failed, 77 no GPU visible (prints SKIP and the reason; nothing
#       was checked).
set -uo pipefail
cd "$(dirname "$0")/../.."

max_ranks="${1:-8}"
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "SKIP: no GPU visible (nvidia-smi missing or nvidia-smi -L failed)"
  exit 77
fi
ngpu="$(nvidia-smi -L | grep -c '^GPU')"
echo "GPUs: ${ngpu}"
nvidia-smi -L

if [[ -n "${FALCON_BIN:-}" ]]; then
  launch="${FALCON_BIN}/falcon_launch"
  check="${FALCON_BIN}/collective_op_check"
else
  bazel build //collective:falcon_launch //collective/testing:collective_op_check || exit 1
  launch="bazel-bin/collective/falcon_launch"
  check="bazel-bin/collective/testing/collective_op_check"
fi

failed=0
run() {
  echo "== $*"
  if "$@"; then echo "PASS: $*"; else echo "FAIL: $*"; failed=1; fi
}

for n in 1 2 4 8; do
  (( n <= ngpu && n <= max_ranks )) || continue
  run "${launch}" --nproc "${n}" --nodes 1 --backend nccl --comm_timeout_ms 60000 -- \
    "${check}" --profile
done
if (( ngpu >= 3 )); then
  run "${launch}" --nproc 3 --backend nccl --comm_timeout_ms 20000 -- "${check}" --die_rank=2
fi
if [[ -z "${FALCON_BIN:-}" ]]; then
  # World and buffer tests take their GPU branches when a GPU is usable.
  run bazel test //collective:world_test //collective:buffer_test
fi

if (( failed )); then echo "collective GPU checks: FAILED"; exit 1; fi
echo "collective GPU checks: all passed"
