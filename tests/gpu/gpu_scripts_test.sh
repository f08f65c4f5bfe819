#!/usr/bin/env bash
# The GPU scripts' own logic, on any machine: fake nvidia-smi, falcon_launch and
# collective_op_check stand in for the GPU, so the checks below run without one.
#   run_collective_gpu.sh: no GPU (nvidia-smi failing or absent) -> "SKIP" and exit 77; with N
#     fake GPUs it runs exactly the worlds 1, 2, 4, 8 that fit N and MAX_RANKS, the dead-rank
#     check only from 3 GPUs, all on --backend nccl; a failing check -> "FAILED" and exit 1.
#   run_shim_gpu.sh, run_profiler_gpu.sh: no GPU -> "SKIP" and exit 77 before building anything; a
#     GPU but no built binaries -> names the missing file and exits 2.
#   gpu_check.sh (`./falcon gpu-check`), with fake gpu_probe, gpu_check_app and NCCL scripts: no GPU
#     -> "gpu-check: FAIL: no NVIDIA GPU visible: <reason>", a FAIL line for every check, exit 1
#     (not 77); everything passing -> seven PASS lines and exit 0; one failing figure or program ->
#     that check's FAIL line with the reason, the other checks still run, exit 1; the slowdown
#     ratio computed from the two times against 1.3x.
# The scripts' real runs need a GPU host and are run by hand there; the GPU-only check inside
# `./falcon test` is //tools:gpu_probe_test in the CUDA variant (skipped, with the reason, where no
# GPU is visible).
set -uo pipefail
COLLECTIVE="$(pwd)/tests/gpu/run_collective_gpu.sh"
SHIM="$(pwd)/tests/gpu/run_shim_gpu.sh"
PROFILER="$(pwd)/tests/gpu/run_profiler_gpu.sh"
PYTORCH="$(pwd)/tests/gpu/run_pytorch_gpu.sh"
GPU_CHECK="$(pwd)/tests/gpu/gpu_check.sh"
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

out="$(env PATH="$GPU_PATH" FAKE_NGPU=1 FALCON_SKIP_BUILD=1 bash "$SHIM" 2>&1)"
rc=$?
expect "shim, no binaries: exit" "$rc" 2
grep -q "^missing .*nccl_real_app (build first)" <<<"$out" || fail "shim: missing file not named: $out"

for script in "$SHIM" "$PROFILER" "$PYTORCH"; do
  name="$(basename "$script")"
  out="$(env PATH="$GPU_PATH" FAKE_NGPU=fail bash "$script" 2>&1)"
  rc=$?
  expect "$name, nvidia-smi failing: exit" "$rc" 77
  grep -q "^SKIP: no GPU visible" <<<"$out" || fail "$name, nvidia-smi failing: no SKIP line: $out"
done

out="$(env PATH="$GPU_PATH" FAKE_NGPU=1 FALCON_SKIP_BUILD=1 bash "$PROFILER" 2>&1)"
rc=$?
expect "profiler, no binaries: exit" "$rc" 2
grep -q "^missing .*nccl_real_app (build first)" <<<"$out" ||
  fail "profiler: missing file not named: $out"

# gpu_check.sh with stand-ins: gpu_probe reports $FAKE_CUDA_GPUS GPUs; gpu_check_app prints
# $FAKE_<SUBCOMMAND> (default: good figures) and exits $FAKE_APP_RC_<SUBCOMMAND> (default 0); the
# NCCL scripts print their summary lines and exit $FAKE_SHIM_RC / $FAKE_PROFILER_RC (default 0).
FAKEBIN="$WORK/bazel-bin"
mkdir -p "$FAKEBIN/tools" "$FAKEBIN/tests/gpu"
cat >"$FAKEBIN/tools/gpu_probe" <<'SH'
#!/usr/bin/env bash
if [ "${FAKE_CUDA_GPUS:-1}" = 0 ]; then
  echo "variant=cuda nccl_version=22809 gpus=0 reason=cudaErrorNoDevice (no CUDA-capable device is detected)"
else
  echo "variant=cuda nccl_version=22809 gpus=${FAKE_CUDA_GPUS:-1}"
fi
SH
cat >"$FAKEBIN/tests/gpu/gpu_check_app" <<'SH'
#!/usr/bin/env bash
case "$1" in
  gemm) echo "${FAKE_GEMM:-gemm m=1000 n=700 k=300 repeats=10 fastest_ms=0.021 tflops=20.0 max_rel_err=2.1e-07}"
        exit "${FAKE_APP_RC_GEMM:-0}" ;;
  validation) echo "${FAKE_VALIDATION:-validation_gemm m=4096 n=4096 k=4096 repeats=3 duration_ms=2.700000 tflops=50.9 max_abs_err=0}"
        exit "${FAKE_APP_RC_VALIDATION:-0}" ;;
  slowdown) echo "${FAKE_SLOWDOWN:-slowdown m=4096 repeats=3 uncontended_ms=2.700000 contended_ms=5.400000 ratio=2.000 spinner_blocks=132 spinner_started=132 spinner_deadline_blocks=0}"
        exit "${FAKE_APP_RC_SLOWDOWN:-0}" ;;
esac
exit 2
SH
cat >"$WORK/fake_shim.sh" <<'SH'
echo "iteration_us baseline=100.0 interposer=101.0 (+1.00%) profiled=103.0 (+3.00%)"
if [ "${FAKE_SHIM_RC:-0}" != 0 ]; then echo "FAIL:"; echo "  results changed: a b"; fi
exit "${FAKE_SHIM_RC:-0}"
SH
cat >"$WORK/fake_profiler.sh" <<'SH'
echo 'op records 400 by kind {"SEND": 200, "RECV": 200}; peer transfers 0 (not required: one GPU, no network)'
[ "${FAKE_PROFILER_RC:-0}" = 0 ] || echo "FAIL:"
exit "${FAKE_PROFILER_RC:-0}"
SH
cat >"$WORK/fake_pytorch.sh" <<'SH'
echo "eager: torch 2.11.0+cu130 NCCL 2.28.9, 20 steps: 40/40 NCCL op records on 1 comm(s), 20/20 Gloo"
[ "${FAKE_PYTORCH_RC:-0}" = 0 ] || echo "FAIL:"
exit "${FAKE_PYTORCH_RC:-0}"
SH
chmod +x "$FAKEBIN/tools/gpu_probe" "$FAKEBIN/tests/gpu/gpu_check_app"

# run_check [VAR=VALUE...]: runs gpu_check.sh with the fakes and one fake GPU; sets out and rc.
run_check() {
  out="$(env PATH="$GPU_PATH" FAKE_NGPU=1 FALCON_SKIP_BUILD=1 FALCON_GPU_CHECK_BIN="$FAKEBIN" \
    FALCON_GPU_CHECK_SHIM="$WORK/fake_shim.sh" FALCON_GPU_CHECK_PROFILER="$WORK/fake_profiler.sh" \
    FALCON_GPU_CHECK_PYTORCH="$WORK/fake_pytorch.sh" FALCON_GPU_CHECK_LOGS="$WORK/logs" "$@" bash "$GPU_CHECK" 2>&1)"
  rc=$?
}
# verdicts: the PASS/FAIL word and check name of each check line, in order.
verdicts() { grep -E '^(PASS|FAIL) ' <<<"$out" | sed -E 's/^(PASS|FAIL) ([a-z-]+).*/\1 \2/'; }
ALL_CHECKS=(gpu-visible nccl-interposer nccl-profiler-plugin gemm-event-timing validation-gemm
  induced-slowdown pytorch-nccl)
# want_verdicts WHAT FAILING...: every check PASSes but the named ones, which FAIL.
want_verdicts() {
  local what="$1" want="" c
  shift
  for c in "${ALL_CHECKS[@]}"; do
    if [[ " $* " == *" $c "* ]]; then want+="FAIL $c"$'\n'; else want+="PASS $c"$'\n'; fi
  done
  expect "$what: verdicts" "$(verdicts)" "${want%$'\n'}"
}

run_check FAKE_NGPU=fail
expect "gpu-check, nvidia-smi failing: exit" "$rc" 1
grep -qx "gpu-check: FAIL: no NVIDIA GPU visible: nvidia-smi -L failed: NVIDIA-SMI has failed" \
  <<<"$out" || fail "gpu-check, nvidia-smi failing: no clear no-GPU line: $out"
want_verdicts "gpu-check, nvidia-smi failing" "${ALL_CHECKS[@]}"
grep -q "^FAIL induced-slowdown: not run: no GPU visible" <<<"$out" ||
  fail "gpu-check, nvidia-smi failing: later checks not failed with the reason: $out"
grep -q "gpu-check: 0 passed, 7 failed" <<<"$out" || fail "gpu-check: no summary line: $out"

run_check FAKE_NGPU=0
expect "gpu-check, no GPU listed: exit" "$rc" 1
grep -q "^gpu-check: FAIL: no NVIDIA GPU visible: nvidia-smi -L lists no GPU" <<<"$out" ||
  fail "gpu-check, no GPU listed: no clear line: $out"

if ! PATH=/usr/bin:/bin command -v nvidia-smi >/dev/null 2>&1; then
  out="$(env PATH=/usr/bin:/bin FALCON_SKIP_BUILD=1 FALCON_GPU_CHECK_LOGS="$WORK/logs" \
    bash "$GPU_CHECK" 2>&1)"
  rc=$?
  expect "gpu-check, nvidia-smi absent: exit" "$rc" 1
  grep -q "^gpu-check: FAIL: no NVIDIA GPU visible: nvidia-smi not found" <<<"$out" ||
    fail "gpu-check, nvidia-smi absent: no clear line: $out"
fi

run_check
expect "gpu-check, all passing: exit" "$rc" 0
want_verdicts "gpu-check, all passing"
grep -q "gpu-check: 7 passed, 0 failed" <<<"$out" || fail "gpu-check: no summary: $out"
grep -q "^PASS induced-slowdown: .*2.700000 ms.*5.400000 ms: 2.00x (>= 1.3x)" <<<"$out" ||
  fail "gpu-check: slowdown figures not shown: $out"
grep -q "^PASS nccl-profiler-plugin: .*peer transfers 0 (not required: one GPU" <<<"$out" ||
  fail "gpu-check: the plugin check does not say peer transfers are not required: $out"

run_check FAKE_CUDA_GPUS=0
expect "gpu-check, CUDA sees no GPU: exit" "$rc" 1
want_verdicts "gpu-check, CUDA sees no GPU" "${ALL_CHECKS[@]}"
grep -q "^FAIL gpu-visible: .*cudaErrorNoDevice" <<<"$out" || fail "gpu-check: CUDA reason lost: $out"

run_check FAKE_GEMM="gemm m=1000 n=700 k=300 repeats=10 fastest_ms=0.021 tflops=20.0 max_rel_err=0.5"
expect "gpu-check, wrong GEMM: exit" "$rc" 1
want_verdicts "gpu-check, wrong GEMM" gemm-event-timing
grep -q "^FAIL gemm-event-timing: wrong product: max relative error 0.5" <<<"$out" ||
  fail "gpu-check, wrong GEMM: reason: $out"

run_check FAKE_VALIDATION="validation_gemm m=4096 n=4096 k=4096 repeats=3 duration_ms=nan tflops=inf max_abs_err=0"
expect "gpu-check, non-finite validation time: exit" "$rc" 1
want_verdicts "gpu-check, non-finite validation time" validation-gemm

run_check FAKE_APP_RC_GEMM=2 FAKE_GEMM="gpu_check_app gemm: INTERNAL: cublasCreate: CUBLAS_STATUS_NOT_INITIALIZED"
want_verdicts "gpu-check, GEMM program error" gemm-event-timing
grep -q "^FAIL gemm-event-timing: exit 2: .*CUBLAS_STATUS_NOT_INITIALIZED" <<<"$out" ||
  fail "gpu-check, GEMM program error: reason: $out"

run_check FAKE_SHIM_RC=1
expect "gpu-check, interposer check failing: exit" "$rc" 1
want_verdicts "gpu-check, interposer check failing" nccl-interposer

run_check FAKE_PROFILER_RC=2
want_verdicts "gpu-check, plugin check failing" nccl-profiler-plugin

run_check FAKE_PYTORCH_RC=1
expect "gpu-check, PyTorch check failing: exit" "$rc" 1
want_verdicts "gpu-check, PyTorch check failing" pytorch-nccl
run_check FAKE_PYTORCH_RC=77
grep -q "^FAIL pytorch-nccl: the script found no GPU" <<<"$out" ||
  fail "gpu-check, PyTorch check skipped: not a failure with the reason: $out"

# The slowdown ratio: contended / uncontended from the printed times, against 1.3x.
slowdown() {
  echo "slowdown m=4096 repeats=3 uncontended_ms=$1 contended_ms=$2 ratio=9.9 spinner_blocks=132 spinner_started=132 spinner_deadline_blocks=${3:-0}"
}
run_check FAKE_SLOWDOWN="$(slowdown 2.000000 2.500000)"
want_verdicts "gpu-check, 1.25x slowdown" induced-slowdown
grep -q "^FAIL induced-slowdown: slowdown 1.25x < 1.3x" <<<"$out" || fail "gpu-check, 1.25x: $out"
run_check FAKE_SLOWDOWN="$(slowdown 2.000000 2.600000)"
want_verdicts "gpu-check, 1.30x slowdown" 
grep -q "^PASS induced-slowdown: .*1.30x (>= 1.3x)" <<<"$out" || fail "gpu-check, 1.30x: $out"
run_check FAKE_SLOWDOWN="$(slowdown 1.5e+00 4.5e+00)"
grep -q "^PASS induced-slowdown: .*3.00x" <<<"$out" || fail "gpu-check, exponent notation: $out"
run_check FAKE_SLOWDOWN="$(slowdown 2.000000 9.000000 3)"
want_verdicts "gpu-check, spinner hit its deadline" induced-slowdown
grep -q "^FAIL induced-slowdown: the competing kernel ran until its deadline in 3 block" <<<"$out" ||
  fail "gpu-check, spinner deadline: $out"
run_check FAKE_SLOWDOWN="$(slowdown 0.000000 2.000000)"
want_verdicts "gpu-check, zero uncontended time" induced-slowdown

if ((failures)); then
  echo "gpu_scripts_test: $failures check(s) failed" >&2
  exit 1
fi
echo PASS
