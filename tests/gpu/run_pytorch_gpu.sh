#!/bin/bash
# Runs a one-GPU PyTorch job on the NCCL backend (tests/gpu/pytorch_nccl_job.py) under the falcon
# package and the NCCL interposer (LD_PRELOAD libfalcon_nccl.so), against a fake agent, twice:
# with NCCL's communicator made lazily (after falcon.init) and eagerly (init_process_group with
# device_id, before falcon.init; this run is also profiled). Checks, per run:
#  1. one shim session (one hello), and it is the package's: the job's layout and GPU in it;
#  2. every NCCL op reached the agent once, from the interposer, on a registered communicator;
#     none on the package's id for the NCCL world (nothing counted twice);
#  3. every Gloo op reached it once, from the package, on the Gloo group's id;
#  4. the validation GEMM ran on the GPU (faster than the same session's CPU GEMM); printed;
#  5. profiled run: device time on the NCCL ops.
# Usage: tests/gpu/run_pytorch_gpu.sh [steps=20]
# Needs: a GPU, python3 with torch built with CUDA, bazel (or prebuilt bazel-bin outputs with
# FALCON_SKIP_BUILD=1). Exit: 0 pass, 1 a check failed, 2 a binary is missing, 77 no GPU or no
# CUDA torch (prints SKIP and the reason).
set -euo pipefail

STEPS="${1:-20}"
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
# shellcheck source=tests/gpu/nccl_script_lib.sh
source "$(dirname "$0")/nccl_script_lib.sh"
cd "$ROOT"
require_gpu
if ! python3 -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  echo "SKIP: python3's torch is missing or sees no CUDA device"
  exit 77
fi
build_nccl_programs //trainer_shim:libfalcon_shim.so
SHIM_LIB="$ROOT/bazel-bin/trainer_shim/libfalcon_shim.so"
require_files "$PRELOAD" "$AGENT" "$SHIM_LIB"
make_run_dir falcon_pytorch_gpu

port=29611
for init in lazy eager; do
  profiling=0
  [[ "$init" == eager ]] && profiling=1
  sock="$TMP/$init.sock"
  start_fake_agent "$sock" "$TMP/$init.summary.json" "$TMP/$init.agent.err"
  echo "== $init init (FALCON_PROFILING=$profiling)"
  rc=0
  env LD_PRELOAD="$PRELOAD" FALCON_AGENT_SOCKET="$sock" FALCON_JOB=pytorch-gpu \
    FALCON_SHIM_LIB="$SHIM_LIB" FALCON_PROFILING="$profiling" FALCON_SHIM_EXIT_FLUSH_MS=5000 \
    PYTHONPATH="$ROOT/python${PYTHONPATH:+:$PYTHONPATH}" MASTER_PORT="$port" \
    timeout 240 python3 "$ROOT/tests/gpu/pytorch_nccl_job.py" --init "$init" --steps "$STEPS" \
    >"$TMP/$init.out" 2>"$TMP/$init.err" || rc=$?
  kill -TERM "$AGENT_PID"
  wait "$AGENT_PID" || true
  AGENT_PID=""
  grep -v '^result ' "$TMP/$init.out" || true
  tail -n 20 "$TMP/$init.err"
  if ((rc != 0)); then
    echo "FAIL: the $init job exited $rc"
    exit 1
  fi
  port=$((port + 1))
done

python3 - "$TMP" <<'PY'
import json, sys
tmp = sys.argv[1]
fail = []
for init in ("lazy", "eager"):
    out = open(f"{tmp}/{init}.out").read().split("\n")
    res = json.loads(next(l for l in out if l.startswith("result "))[len("result "):])
    summary = json.loads(open(f"{tmp}/{init}.summary.json").read().strip().split("\n")[-1])
    by_comm = {k: v for k, v in summary["records_by_comm"].items()}
    registered = {str(c["comm_id"]) for c in summary["communicators"]}
    gloo, pworld = res["gloo_comm"], res["package_world_comm"]
    nccl = {k: v for k, v in by_comm.items() if k not in (gloo, pworld)}
    def check(ok, what):
        if not ok:
            fail.append(f"{init}: {what}")
    check(summary["hellos"] == 1, f"{summary['hellos']} shim sessions, expected 1")
    hello = summary["hello_layouts"][0] if summary["hello_layouts"] else {}
    check(hello.get("dp_size") == 1 and hello.get("global_micro_batches") == 1,
          f"the session is not the package's (its layout: {hello})")
    check(hello.get("gpu") == 0, f"the session's GPU is {hello.get('gpu')}, not 0")
    check(sum(nccl.values()) == res["nccl_ops"],
          f"{sum(nccl.values())} NCCL op records ({nccl}), {res['nccl_ops']} issued")
    check(all(k in registered for k in nccl), f"NCCL ops on unregistered comms: {nccl}")
    check(by_comm.get(pworld, 0) == 0,
          f"{by_comm.get(pworld, 0)} records on the package's NCCL world id: counted twice")
    check(by_comm.get(gloo, 0) == res["gloo_ops"],
          f"{by_comm.get(gloo, 0)} Gloo op records, {res['gloo_ops']} issued")
    check(res["device"].startswith("cuda"), f"the session's device is {res['device']}")
    g, c = res["gpu_gemm"], res["cpu_gemm"]
    check(g["tflops"] > c["tflops"], f"GPU GEMM {g['tflops']:.3f} TFLOP/s not above CPU's")
    if init == "eager":
        timed = summary["records_with_device_time"]
        check(timed >= 0.9 * res["nccl_ops"], f"only {timed} of {res['nccl_ops']} NCCL ops "
              "carry device time when profiled")
    print(f"{init}: torch {res['torch']} NCCL {res['nccl']}, {res['steps']} steps: "
          f"{sum(nccl.values())}/{res['nccl_ops']} NCCL op records on {len(nccl)} comm(s), "
          f"{by_comm.get(gloo, 0)}/{res['gloo_ops']} Gloo, hello {hello}, "
          f"device-timed {summary['records_with_device_time']}; validation GEMM on "
          f"{res['device']}: {g['n']}^3 {g['ns'] / 1e6:.3f} ms = {g['tflops']:.1f} TFLOP/s "
          f"(CPU {c['n']}^3: {c['tflops']:.3f} TFLOP/s)")
    print(f"{init} summary: {json.dumps(summary)}")
if fail:
    print("FAIL:", *fail, sep="\n  ")
    sys.exit(1)
print("PASS")
PY
