#!/usr/bin/env bash
# `./falcon gpu-check`: the GPU self-check. Builds the CUDA variant's GPU programs and runs them for
# real on this machine's GPU, printing "PASS <check>[: figures]" or "FAIL <check>: <why>" for each
# check, then "gpu-check: N passed, N failed". Checks (tests/gpu/README.md):
#   gpu-visible           nvidia-smi -L lists a GPU and the CUDA runtime counts it (tools:gpu_probe)
#   nccl-interposer       run_shim_gpu.sh: libfalcon_nccl.so under a real NCCL program
#   nccl-profiler-plugin  run_profiler_gpu.sh: NCCL loads libnccl-profiler-falcon.so, op records
#   gemm-event-timing     a cuBLAS SGEMM timed with CUDA events, checked against a CPU reference
#   validation-gemm       the validation task's GEMM (4096^3 FP32, fastest of 3) on the GPU
#   induced-slowdown      the same GEMM beside a competing kernel: >= 1.3x slower than alone
#   pytorch-nccl          run_pytorch_gpu.sh: a PyTorch NCCL job under the falcon package and the
#                         interposer; every op counted once, the validation GEMM on the GPU
# A check that cannot run FAILs with the reason; nothing is skipped. Without a GPU it prints
# "gpu-check: FAIL: no NVIDIA GPU visible: <reason>" and fails every check without building.
# Exit: 0 every check passed, 1 otherwise.
# Env: FALCON_SKIP_BUILD=1  use the outputs already under bazel-bin;
#      FALCON_GPU_CHECK_LOGS=DIR  where each check's full output goes (default: a new /tmp dir);
#      FALCON_GPU_CHECK_BIN, FALCON_GPU_CHECK_SHIM, FALCON_GPU_CHECK_PROFILER,
#      FALCON_GPU_CHECK_PYTORCH  stand-ins for the bazel-bin root and the three scripts
#      (tests/gpu/gpu_scripts_test.sh).
set -uo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$ROOT"
BIN="${FALCON_GPU_CHECK_BIN:-$ROOT/bazel-bin}"
SHIM_SCRIPT="${FALCON_GPU_CHECK_SHIM:-$ROOT/tests/gpu/run_shim_gpu.sh}"
PROFILER_SCRIPT="${FALCON_GPU_CHECK_PROFILER:-$ROOT/tests/gpu/run_profiler_gpu.sh}"
PYTORCH_SCRIPT="${FALCON_GPU_CHECK_PYTORCH:-$ROOT/tests/gpu/run_pytorch_gpu.sh}"
PROFILER_LABEL=//trainer_shim/nccl_profiler:libnccl-profiler-falcon.so
LOGS="${FALCON_GPU_CHECK_LOGS:-$(mktemp -d /tmp/falcon_gpu_check.XXXXXX)}"
mkdir -p "$LOGS"
MIN_SLOWDOWN=1.3
CHECKS=(gpu-visible nccl-interposer nccl-profiler-plugin gemm-event-timing validation-gemm
  induced-slowdown pytorch-nccl)
T0=$SECONDS

passed=0
failed=0
pass() { echo "PASS $1${2:+: $2}"; passed=$((passed + 1)); }
fail() { echo "FAIL $1: $2"; failed=$((failed + 1)); }
finish() {
  echo "gpu-check: $passed passed, $failed failed in $((SECONDS - T0)) s (logs: $LOGS)"
  ((failed == 0 && passed == ${#CHECKS[@]}))
  exit $?
}
# fail_from INDEX REASON: fails CHECKS[INDEX..] with "not run: REASON" and finishes.
fail_from() {
  local i
  for ((i = $1; i < ${#CHECKS[@]}; i++)); do fail "${CHECKS[$i]}" "not run: $2"; done
  finish
}
# show_tail LOG: the end of a failed check's output, indented.
show_tail() { tail -n 15 "$1" | sed 's/^/    | /'; }
# is_pos NUMBER: a finite number > 0 ("inf" and "nan" are not).
is_pos() {
  [[ "$1" =~ ^[0-9]*\.?[0-9]+([eE][-+]?[0-9]+)?$ ]] && awk -v x="$1" 'BEGIN { exit !(x > 0) }'
}
# kv KEY LINE: the value of KEY=value in LINE (empty when absent).
kv() { sed -nE "s/.*(^| )$1=([^ ]*).*/\2/p" <<<"$2"; }
# run_logged NAME SECONDS CMD...: runs CMD with a time limit, its output in $LOGS/NAME.log; sets rc.
run_logged() {
  local name="$1" secs="$2"
  shift 2
  timeout --kill-after=10 "$secs" "$@" >"$LOGS/$name.log" 2>&1
  rc=$?
}
# script_check NAME SECONDS SCRIPT ARG SUMMARY LINE: runs a check script (FALCON_SKIP_BUILD=1), then
# passes NAME with SUMMARY and the first log line starting with LINE, or fails it with the reason.
script_check() {
  local name="$1" secs="$2"
  run_logged "$name" "$secs" env FALCON_SKIP_BUILD=1 bash "$3" "$4"
  if ((rc == 0)); then
    pass "$name" "$5; $(grep -m1 "^$6" "$LOGS/$name.log")"
  else
    fail "$name" "$(why_failed "$name" "$secs")"
    show_tail "$LOGS/$name.log"
  fi
}
why_failed() {  # why_failed NAME SECONDS: the reason for a non-zero rc, from the log
  case "$rc" in
    124 | 137) echo "timed out after $2 s" ;;
    77) echo "the script found no GPU: $(grep -m1 '^SKIP' "$LOGS/$1.log")" ;;
    *) echo "exit $rc: $(grep -E -m1 'FAIL|missing|error|Error' "$LOGS/$1.log" || tail -n 1 "$LOGS/$1.log")" ;;
  esac
}

echo "gpu-check: logs in $LOGS"
# 1. A GPU, seen by the driver tool first: without one there is nothing to build for.
reason=""
if ! command -v nvidia-smi >/dev/null 2>&1; then
  reason="nvidia-smi not found on PATH (no NVIDIA driver installed)"
elif ! smi="$(nvidia-smi -L 2>&1)"; then
  reason="nvidia-smi -L failed: $(head -n 1 <<<"$smi")"
elif ! grep -q '^GPU ' <<<"$smi"; then
  reason="nvidia-smi -L lists no GPU"
fi
if [[ -n "$reason" ]]; then
  echo "gpu-check: FAIL: no NVIDIA GPU visible: $reason"
  fail gpu-visible "$reason"
  fail_from 1 "no GPU visible"
fi
ngpu="$(grep -c '^GPU ' <<<"$smi")"
echo "$smi"

cuda="${CUDA_PATH:-/usr/local/cuda}"
if [[ "${FALCON_SKIP_BUILD:-0}" != 1 ]]; then
  if [[ ! -x "$cuda/bin/nvcc" || ! -f "$cuda/include/nccl.h" ]]; then
    fail gpu-visible "no CUDA toolkit with NCCL at $cuda (bin/nvcc, include/nccl.h): the CUDA variant cannot be built"
    fail_from 1 "no CUDA toolkit"
  fi
  if ! "$ROOT/deploy/install-deps.sh" >"$LOGS/setup.log" 2>&1; then
    show_tail "$LOGS/setup.log"
    fail gpu-visible "deploy/install-deps.sh failed (see $LOGS/setup.log): the CUDA variant cannot be built"
    fail_from 1 "the build's packages are missing"
  fi
  targets=(//tools:gpu_probe //tests/gpu:gpu_check_app //trainer_shim/nccl:libfalcon_nccl.so
    //trainer_shim/nccl:nccl_real_app //trainer_shim:fake_agent_main //trainer_shim:libfalcon_shim.so)
  echo "gpu-check: building the CUDA variant: ${targets[*]}"
  t=$SECONDS
  if ! bazel build --noshow_progress "${targets[@]}" >"$LOGS/build.log" 2>&1; then
    show_tail "$LOGS/build.log"
    fail gpu-visible "building the CUDA variant failed (see $LOGS/build.log)"
    fail_from 1 "the CUDA variant did not build"
  fi
  echo "gpu-check: built in $((SECONDS - t)) s"
  plugin="built"
  if ! bazel query "$PROFILER_LABEL" >"$LOGS/plugin_build.log" 2>&1; then
    plugin="the target $PROFILER_LABEL does not exist in this checkout"
  elif ! bazel build --noshow_progress "$PROFILER_LABEL" >>"$LOGS/plugin_build.log" 2>&1; then
    plugin="building $PROFILER_LABEL failed (see $LOGS/plugin_build.log)"
  fi
else
  plugin="built"  # FALCON_SKIP_BUILD: run_profiler_gpu.sh names a missing output itself.
fi

if [[ -x "$BIN/tools/gpu_probe" ]]; then
  probe="$("$BIN/tools/gpu_probe" 2>&1)"
else
  probe="$BIN/tools/gpu_probe is not built"
fi
cuda_gpus="$(kv gpus "$probe")"
if [[ "$cuda_gpus" =~ ^[1-9][0-9]*$ ]]; then
  pass gpu-visible "nvidia-smi lists $ngpu GPU(s), the CUDA runtime sees $cuda_gpus ($probe)"
else
  fail gpu-visible "nvidia-smi lists $ngpu GPU(s) but the CUDA runtime sees none: ${probe:-gpu_probe printed nothing}"
  fail_from 1 "the CUDA runtime sees no GPU"
fi

# 2. The interposer under a real NCCL program.
script_check nccl-interposer 180 "$SHIM_SCRIPT" 200 \
  "results unchanged, every op reached the fake agent, device time when profiling" iteration_us

# 3. NCCL's profiler plugin beside the interposer.
if [[ "$plugin" != built ]]; then
  fail nccl-profiler-plugin "$plugin"
else
  script_check nccl-profiler-plugin 180 "$PROFILER_SCRIPT" 200 \
    "NCCL loaded the plugin, results unchanged" "op records"
fi

APP="$BIN/tests/gpu/gpu_check_app"
# 4. A GEMM timed with CUDA events, checked against a CPU reference.
run_logged gemm-event-timing 120 "$APP" gemm
line="$(grep -m1 '^gemm ' "$LOGS/gemm-event-timing.log")"
ms="$(kv fastest_ms "$line")" tflops="$(kv tflops "$line")" err="$(kv max_rel_err "$line")"
if ((rc != 0)) || [[ -z "$line" ]]; then
  fail gemm-event-timing "$(why_failed gemm-event-timing 120)"
  show_tail "$LOGS/gemm-event-timing.log"
elif ! is_pos "$ms" || ! is_pos "$tflops"; then
  fail gemm-event-timing "not a finite positive time and rate: fastest_ms=$ms tflops=$tflops"
elif ! [[ "$err" =~ ^[0-9.eE+-]+$ ]] || ! awk -v e="$err" 'BEGIN { exit !(e <= 1e-3) }'; then
  fail gemm-event-timing "wrong product: max relative error $err against the CPU reference (limit 1e-3)"
else
  pass gemm-event-timing "$(kv m "$line")x$(kv n "$line")x$(kv k "$line") FP32, fastest of $(kv repeats "$line") $ms ms = $tflops TFLOP/s, max relative error $err"
fi

# 5. The validation GEMM as a GPU trainer's executor runs it.
run_logged validation-gemm 120 "$APP" validation --size=4096 --repeats=3
line="$(grep -m1 '^validation_gemm ' "$LOGS/validation-gemm.log")"
ms="$(kv duration_ms "$line")" tflops="$(kv tflops "$line")" err="$(kv max_abs_err "$line")"
if ((rc != 0)) || [[ -z "$line" ]]; then
  fail validation-gemm "$(why_failed validation-gemm 120)"
  show_tail "$LOGS/validation-gemm.log"
elif ! is_pos "$ms" || ! is_pos "$tflops"; then
  fail validation-gemm "not a finite positive time and rate: duration_ms=$ms tflops=$tflops"
elif ! [[ "$err" =~ ^[0-9.eE+-]+$ ]] || ! awk -v e="$err" 'BEGIN { exit !(e <= 1e-3) }'; then
  fail validation-gemm "wrong product: max absolute error $err against the exact value"
else
  pass validation-gemm "4096^3 FP32, fastest of 3 after a warm-up: $ms ms = $tflops TFLOP/s"
fi

# 6. The same GEMM while a competing kernel holds half the SMs of the same GPU.
run_logged induced-slowdown 120 "$APP" slowdown --size=4096 --repeats=3
line="$(grep -m1 '^slowdown ' "$LOGS/induced-slowdown.log")"
alone="$(kv uncontended_ms "$line")" beside="$(kv contended_ms "$line")"
blocks="$(kv spinner_blocks "$line")" started="$(kv spinner_started "$line")"
deadline="$(kv spinner_deadline_blocks "$line")"
if ((rc != 0)) || [[ -z "$line" ]]; then
  fail induced-slowdown "$(why_failed induced-slowdown 120)"
  show_tail "$LOGS/induced-slowdown.log"
elif ! is_pos "$alone" || ! is_pos "$beside"; then
  fail induced-slowdown "not finite positive times: uncontended_ms=$alone contended_ms=$beside"
else
  ratio="$(awk -v a="$alone" -v b="$beside" 'BEGIN { printf "%.2f", b / a }')"
  figures="alone $alone ms, beside the competing kernel ($started of $blocks blocks running) $beside ms: ${ratio}x"
  if [[ "$deadline" != 0 ]]; then
    fail induced-slowdown "the competing kernel ran until its deadline in $deadline block(s): the GEMM waited for it ($figures)"
  elif awk -v r="$ratio" -v min="$MIN_SLOWDOWN" 'BEGIN { exit !(r >= min) }'; then
    pass induced-slowdown "$figures (>= ${MIN_SLOWDOWN}x)"
  else
    fail induced-slowdown "slowdown ${ratio}x < ${MIN_SLOWDOWN}x: $figures"
  fi
fi

# 7. A PyTorch job on NCCL under the package and the interposer.
script_check pytorch-nccl 300 "$PYTORCH_SCRIPT" 20 "every op counted once, the session's" "eager: "
finish
