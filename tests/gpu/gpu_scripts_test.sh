#!/usr/bin/env bash
# The GPU scripts' own logic, on any machine: fake nvidia-smi, falcon_launch and
# collective_op_check stand in for the GPU, so the checks below run without one.
#   run_collective_gpu.sh: no GPU (nvidia-smi failing or absent) -> "SKIP" and exit 77; with N
#     fake GPUs it runs exactly the worlds 1, 2, 4, 8 that fit N and MAX_RANKS, the dead-rank
#     check only from 3 GPUs, all on --backend nccl; a failing check -> "FAILED" and exit 1.
#   run_shim_gpu.sh: no GPU -> "SKIP" and exit 77 before building anything; a GPU but no built
#     binaries -> names the missing file and exits 2.
# The scripts' real runs need a GPU host and are run by hand there; the GPU-only check inside
# `./falcon test` is //tools:gpu_probe_test in the CUDA variant (skipped, with the reason, where no
# GPU is visible).
set -uo pipefail
COLLECTIVE="$(pwd)/tests/gpu/run_collective_gpu.sh"
SHIM="$(pwd)/tests/gpu/run_shim_gpu.sh"
WORK="$(mktemp -d "${TEST_TMPDIR:-/tmp}/gpu_scripts.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

# Fakes: nvidia-smi lists $FAKE_NGPU GPUs (or fails when FAKE_NGPU=fail); falcon_launch logs its
# arguments and fails when its world size is $FAKE_FAIL_NPROC.
mkdir -p "$WORK/gpu" "$WORK/nogpu" "$WORK/bin"
cat >"$WORK/gpu/nvidia-smi" <<'SH'
#!/usr/bin/env bash
if [ "${FAKE_NGPU}" = fail ]; then echo "NVIDIA-SMI has failed" >&2; exit 9; fi
for ((i = 0; i < FAKE_NGPU; i++)); do echo "GPU $i: Fake GPU (UUID: GPU-$i)"; done
SH
cat >"$WORK/bin/falcon_launch" <<'SH'
#!/usr/bin/env bash
echo "$*" >>"$FAKE_LOG"
[[ " $* " == *" --nproc ${FAKE_FAIL_NPROC:-none} "* ]] && exit 1
exit 0
SH
printf '#!/bin/sh\nexit 0\n' >"$WORK/bin/collective_op_check"
chmod +x "$WORK/gpu/nvidia-smi" "$WORK/bin/falcon_launch" "$WORK/bin/collective_op_check"
GPU_PATH="$WORK/gpu:$PATH"

# run_collective NGPU MAX_RANKS [FAIL_NPROC]: sets out, rc and launched (one line per launch).
run_collective() {
  : >"$WORK/launch.log"
  out="$(env PATH="$GPU_PATH" FAKE_NGPU="$1" FAKE_FAIL_NPROC="${3:-none}" \
    FAKE_LOG="$WORK/launch.log" FALCON_BIN="$WORK/bin" bash "$COLLECTIVE" "$2" 2>&1)"
  rc=$?
  # A world launch as "--nproc N", the dead-rank check as "die_rank=R".
  launched="$(sed -E '/--die_rank=/{s/.*--die_rank=([0-9]+).*/die_rank=\1/;b};
    s/^(--nproc [0-9]+) .*/\1/' "$WORK/launch.log")"
}
expect() {  # expect WHAT GOT WANT
  [ "$2" = "$3" ] || fail "$1: got [$2], want [$3]; output:
$out"
}

run_collective fail 8
expect "collective, nvidia-smi failing: exit" "$rc" 77
grep -q "^SKIP: no GPU visible" <<<"$out" || fail "collective, nvidia-smi failing: no SKIP line: $out"
expect "collective, nvidia-smi failing: launches" "$launched" ""

if ! PATH=/usr/bin:/bin command -v nvidia-smi >/dev/null 2>&1; then
  out="$(env PATH=/usr/bin:/bin FALCON_BIN="$WORK/bin" bash "$COLLECTIVE" 2>&1)"
  rc=$?
  expect "collective, nvidia-smi absent: exit" "$rc" 77
fi

run_collective 2 8
expect "collective, 2 GPUs: exit" "$rc" 0
expect "collective, 2 GPUs: worlds" "$launched" $'--nproc 1\n--nproc 2'
grep -q "all passed" <<<"$out" || fail "collective, 2 GPUs: no 'all passed': $out"

run_collective 8 4
expect "collective, 8 GPUs, MAX_RANKS=4: exit" "$rc" 0
expect "collective, 8 GPUs, MAX_RANKS=4: worlds" "$launched" \
  $'--nproc 1\n--nproc 2\n--nproc 4\ndie_rank=2'
grep -c -- "--backend nccl" "$WORK/launch.log" | grep -qx 4 ||
  fail "collective: every launch must use --backend nccl: $(cat "$WORK/launch.log")"

run_collective 4 8 2
expect "collective, world of 2 failing: exit" "$rc" 1
grep -q "^FAIL: .*--nproc 2" <<<"$out" || fail "collective: failing world not named: $out"
grep -q "FAILED" <<<"$out" || fail "collective: no FAILED summary: $out"
expect "collective, world of 2 failing: later worlds still run" "$launched" \
  $'--nproc 1\n--nproc 2\n--nproc 4\ndie_rank=2'

out="$(env PATH="$GPU_PATH" FAKE_NGPU=fail bash "$SHIM" 2>&1)"
rc=$?
expect "shim, nvidia-smi failing: exit" "$rc" 77
grep -q "^SKIP: no GPU visible" <<<"$out" || fail "shim, nvidia-smi failing: no SKIP line: $out"

out="$(env PATH="$GPU_PATH" FAKE_NGPU=1 FALCON_SKIP_BUILD=1 bash "$SHIM" 2>&1)"
rc=$?
expect "shim, no binaries: exit" "$rc" 2
grep -q "^missing .*nccl_real_app (build first)" <<<"$out" || fail "shim: missing file not named: $out"

if ((failures)); then
  echo "gpu_scripts_test: $failures check(s) failed" >&2
  exit 1
fi
echo PASS
