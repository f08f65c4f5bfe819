#!/usr/bin/env bash
# The probe runs on any machine, exits 0 and describes the variant it was built as:
#   nocuda:  "variant=nocuda gpus=0 reason=built without CUDA";
#   cuda:    "variant=cuda nccl_version=2XXYY gpus=N" (NCCL 2.x linked: 2.28.9 reports 22809),
#            with " reason=<CUDA error name> (<text>)" when N=0.
# In the CUDA variant on a machine without a GPU the GPU count cannot be checked: the test is
# skipped with the probe's reason, also under CI=true (falcon_skip_no_gpu in tests/testing/skip.sh).
set -uo pipefail
source tests/testing/skip.sh
out="$("$1")"
rc=$?
echo "$out"
[ "$rc" = 0 ] || { echo "FAIL: the probe exited $rc, want 0" >&2; exit 1; }
[ "$(wc -l <<<"$out")" = 1 ] || { echo "FAIL: want exactly one line" >&2; exit 1; }
case "$out" in
  "variant=nocuda gpus=0 reason=built without CUDA") ;;
  variant=cuda\ nccl_version=2[0-9][0-9][0-9][0-9]\ gpus=0\ reason=cuda*\ \(*\))
    falcon_skip_no_gpu "CUDA reports ${out#*reason=}; GPU count not checked" ;;
  variant=cuda\ nccl_version=2[0-9][0-9][0-9][0-9]\ gpus=[1-9]*)
    [[ "$out" != *reason=* ]] || { echo "FAIL: a reason with GPUs present" >&2; exit 1; } ;;
  *) echo "FAIL: unexpected probe output" >&2; exit 1 ;;
esac
echo PASS
