# Shared by run_shim_gpu.sh and run_profiler_gpu.sh (sourced; set -euo pipefail is theirs):
# the GPU gate, the build, the binaries and the fake agent of a real-NCCL check.

# Exits 77 (SKIP) when no GPU is visible.
require_gpu() {
  if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
    echo "SKIP: no GPU visible (nvidia-smi missing or nvidia-smi -L failed)"
    exit 77
  fi
}

# build_nccl_programs [EXTRA_LABEL...]: builds the interposer, nccl_real_app, the fake agent and
# the extra labels (unless FALCON_SKIP_BUILD=1); sets BIN, APP, PRELOAD, AGENT.
build_nccl_programs() {
  if [[ "${FALCON_SKIP_BUILD:-0}" != 1 ]]; then
    bazel build //trainer_shim/nccl:libfalcon_nccl.so //trainer_shim/nccl:nccl_real_app \
      //trainer_shim:fake_agent_main "$@"
  fi
  BIN="$ROOT/bazel-bin/trainer_shim"
  APP="$BIN/nccl/nccl_real_app"
  PRELOAD="$BIN/nccl/libfalcon_nccl.so"
  AGENT="$BIN/fake_agent_main"
}

# require_files FILE...: exits 2 naming the first that is missing.
require_files() {
  local f
  for f in "$@"; do
    [[ -e "$f" ]] || { echo "missing $f (build first)"; exit 2; }
  done
}

# make_run_dir PREFIX: a new /tmp/PREFIX.XXXXXX as TMP, SOCK inside it, and a trap that stops the
# fake agent (AGENT_PID) at exit.
make_run_dir() {
  TMP="$(mktemp -d "/tmp/$1.XXXXXX")"
  SOCK="$TMP/agent.sock"
  AGENT_PID=""
  trap '[[ -n "$AGENT_PID" ]] && kill "$AGENT_PID" 2>/dev/null || true' EXIT
}

# start_fake_agent SOCKET OUT ERR: the fake agent on SOCKET (summary JSON to OUT); sets AGENT_PID;
# exits 2 if it does not listen within 5 s.
start_fake_agent() {
  "$AGENT" --socket="$1" > "$2" 2> "$3" &
  AGENT_PID=$!
  for _ in $(seq 100); do [[ -S "$1" ]] && break; sleep 0.05; done
  [[ -S "$1" ]] || { echo "fake agent did not start"; cat "$3"; exit 2; }
}
