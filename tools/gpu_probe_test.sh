#!/usr/bin/env bash
# The probe must run on any machine and describe the variant it was built as.
set -euo pipefail
out="$("$1")"
echo "$out"
case "$out" in
  variant=cuda\ nccl_version=2*) ;;   # NCCL 2.x linked (2.28.9 reports 22809)
  variant=nocuda\ gpus=0*) ;;
  *) echo "unexpected probe output" >&2; exit 1 ;;
esac
