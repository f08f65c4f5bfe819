#!/bin/bash
# Runs NCCL's profiler plugin (libnccl-profiler-falcon.so, NCCL_PROFILER_PLUGIN) under a real NCCL
# program on a GPU host, beside the interposer (LD_PRELOAD libfalcon_nccl.so, whose communicator
# binding the plugin feeds the shim through); checks that
#  1. NCCL's log (NCCL_DEBUG=INFO) says it loaded the plugin,
#  2. results are unchanged (same checksums as without the plugin and interposer),
#  3. op records reached a fake agent with the plugin loaded (their count by op kind is printed).
# Then a second run with FALCON_NCCL_OP_TIMING=plugin (the plugin, not the interposer, sends the op
# records) prints what arrived, without requiring any: on one GPU every communicator has one rank,
# NCCL runs one-rank collectives as a local copy its profiler may not see, and nothing crosses a
# network, so neither plugin op records nor peer transfers (PEER_SEND / PEER_RECV) are required
# here; multi-GPU runs check those.
# Usage (from anywhere in the repository, on a machine with a GPU, CUDA and NCCL):
#   tests/gpu/run_profiler_gpu.sh [iterations=200] [elements=1048576]
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
build_nccl_programs //trainer_shim/nccl_profiler:libnccl-profiler-falcon.so
PLUGIN="$BIN/nccl_profiler/libnccl-profiler-falcon.so"
require_files "$APP" "$PRELOAD" "$PLUGIN" "$AGENT"

make_run_dir falcon_gpu_profiler

echo "== baseline (no interposer, no plugin)"
"$APP" "$ITER" "$ELEMS" | tee "$TMP/base.txt"

start_fake_agent "$SOCK" "$TMP/summary.json" "$TMP/agent.err"

echo "== interposer + profiler plugin"
env LD_PRELOAD="$PRELOAD" FALCON_AGENT_SOCKET="$SOCK" FALCON_JOB=gpujob \
  FALCON_SHIM_EXIT_FLUSH_MS=5000 NCCL_PROFILER_PLUGIN="$PLUGIN" \
  NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=ALL NCCL_DEBUG_FILE="$TMP/nccl_debug.log" \
  "$APP" "$ITER" "$ELEMS" | tee "$TMP/plugin.txt"

kill -TERM "$AGENT_PID"
wait "$AGENT_PID" || true
AGENT_PID=""

echo "== interposer + profiler plugin, FALCON_NCCL_OP_TIMING=plugin (informative)"
start_fake_agent "$TMP/agent2.sock" "$TMP/summary_plugin_ops.json" "$TMP/agent2.err"
env LD_PRELOAD="$PRELOAD" FALCON_AGENT_SOCKET="$TMP/agent2.sock" FALCON_JOB=gpujob \
  FALCON_SHIM_EXIT_FLUSH_MS=5000 FALCON_NCCL_OP_TIMING=plugin NCCL_PROFILER_PLUGIN="$PLUGIN" \
  "$APP" "$ITER" "$ELEMS" > "$TMP/plugin_ops.txt" || echo "(run with plugin op timing failed)"
kill -TERM "$AGENT_PID"
wait "$AGENT_PID" || true
echo "plugin op timing: $(tail -n 1 "$TMP/summary_plugin_ops.json" 2>/dev/null || echo none)"
AGENT_PID=""

echo "== NCCL's profiler plugin lines"
grep -i "PROFILER" "$TMP/nccl_debug.log" || echo "(none in $TMP/nccl_debug.log)"

python3 - "$TMP" <<'PY'
import json, re, sys
tmp = sys.argv[1]
def results(name):
    return [l for l in open(f"{tmp}/{name}").read().split("\n") if l.startswith("result ")]
base, plug = results("base.txt"), results("plugin.txt")
log = open(f"{tmp}/nccl_debug.log", errors="replace").read()
summary = json.loads(open(f"{tmp}/summary.json").read().strip().split("\n")[-1])
fail = []
if not re.search(r"PROFILER/Plugin: loaded", log, re.IGNORECASE):
    fail.append("NCCL's log does not say it loaded the profiler plugin (no 'PROFILER/Plugin: loaded')")
if not base or base != plug:
    fail.append(f"results changed: baseline {base} with plugin {plug}")
if summary.get("records", 0) < 1:
    fail.append(f"no op records reached the agent (summary {json.dumps(summary)})")
by_kind = summary.get("records_by_kind", {})
peers = sum(n for kind, n in by_kind.items() if kind.endswith(("PEER_SEND", "PEER_RECV")))
print(f"op records {summary.get('records', 0)} by kind {json.dumps(by_kind)}; "
      f"peer transfers {peers} (not required: one GPU, no network)")
import os
if os.path.exists(f"{tmp}/plugin_ops.txt") and base != results("plugin_ops.txt"):
    fail.append("results changed with FALCON_NCCL_OP_TIMING=plugin")
if fail:
    print("FAIL:", *fail, sep="\n  ")
    sys.exit(1)
print("PASS")
PY
