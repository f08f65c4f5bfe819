#!/bin/bash
# Runs libfalcon_nccl.so (LD_PRELOAD) under a real NCCL program on a GPU host and checks that
#  1. results are unchanged (same checksums with and without the interposer),
#  2. every op reached a fake agent, with communicators registered and device time when profiling,
#     except the app's sends and receives to itself (one rank: the shim refuses those, a rank is
#     no link; counted in its records_rejected),
#  3. the A/B overhead on iteration time (printed; informative, not a pass/fail gate).
# Usage (from anywhere in the repository, on a machine with a GPU, CUDA and NCCL):
#   tests/gpu/run_shim_gpu.sh [iterations=200] [elements=1048576]
# Needs: bazel (or prebuilt bazel-bin outputs with FALCON_SKIP_BUILD=1), python3.
# Exit: 0 pass, 1 a check failed, 2 a binary or the fake agent is missing, 77 no GPU visible
# (prints SKIP and the reason; nothing was checked).
set -euo pipefail

ITER="${1:-200}"
ELEMS="${2:-1048576}"
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
# shellcheck source=tests/gpu/nccl_script_lib.sh
source "$(dirname "$0")/nccl_script_lib.sh"
cd "$ROOT"
require_gpu
build_nccl_programs
require_files "$APP" "$PRELOAD" "$AGENT"

make_run_dir falcon_gpu

nvidia-smi -L || true
echo "== baseline (no interposer)"
"$APP" "$ITER" "$ELEMS" | tee "$TMP/base.txt"

start_fake_agent "$SOCK" "$TMP/summary.json" "$TMP/agent.err"

SHIM_ENV=(LD_PRELOAD="$PRELOAD" FALCON_AGENT_SOCKET="$SOCK" FALCON_JOB=gpujob
          FALCON_SHIM_EXIT_FLUSH_MS=5000)
echo "== interposer, host timing"
env "${SHIM_ENV[@]}" "$APP" "$ITER" "$ELEMS" | tee "$TMP/shim.txt"
echo "== interposer, device timing (FALCON_PROFILING=1)"
env "${SHIM_ENV[@]}" FALCON_PROFILING=1 "$APP" "$ITER" "$ELEMS" | tee "$TMP/prof.txt"
echo "== baseline again (A/B/A)"
"$APP" "$ITER" "$ELEMS" > "$TMP/base2.txt"

kill -TERM "$AGENT_PID"
wait "$AGENT_PID" || true
AGENT_PID=""

python3 - "$TMP" <<'PY'
import json, sys
tmp = sys.argv[1]
def read(name):
    lines = open(f"{tmp}/{name}").read().split("\n")
    res = [l for l in lines if l.startswith("result ")]
    kv = dict(l.split(" ", 1) for l in lines
              if l.startswith(("ops_issued", "ops_self_p2p", "iteration_us")))
    # Sends and receives to itself are refused by the shim (a rank is no link).
    return res, int(kv["ops_issued"]) - int(kv["ops_self_p2p"]), float(kv["iteration_us"])
base, _, t_base = read("base.txt")
base2, _, t_base2 = read("base2.txt")
shim, ops_shim, t_shim = read("shim.txt")
prof, ops_prof, t_prof = read("prof.txt")
summary = json.loads(open(f"{tmp}/summary.json").read().strip().split("\n")[-1])
fail = []
if not (base == shim == prof == base2):
    fail.append(f"results changed: {base} {shim} {prof}")
if summary["records"] != ops_shim + ops_prof:
    fail.append(f"agent got {summary['records']} records, expected {ops_shim + ops_prof}")
if summary["hellos"] != 2:
    fail.append(f"expected 2 shim sessions, got {summary['hellos']}")
if len(summary["communicators"]) != 6:
    fail.append(f"expected 3 communicators per run, got {len(summary['communicators'])}")
if summary["records_with_device_time"] < 0.9 * ops_prof:
    fail.append(f"only {summary['records_with_device_time']} of {ops_prof} profiled ops timed")
t_ref = (t_base + t_base2) / 2
print(f"iteration_us baseline={t_ref:.1f} interposer={t_shim:.1f} "
      f"({100 * (t_shim / t_ref - 1):+.2f}%) profiled={t_prof:.1f} "
      f"({100 * (t_prof / t_ref - 1):+.2f}%)")
print("summary:", json.dumps(summary))
if fail:
    print("FAIL:", *fail, sep="\n  ")
    sys.exit(1)
print("PASS")
PY
