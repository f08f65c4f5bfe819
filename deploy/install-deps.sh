#!/usr/bin/env bash
# Installs exactly the Debian 12 packages Falcon's build, tests and demo need. Idempotent: runs
# `apt-get update` and `apt-get install` only when something is missing. Needs root for installs.
# Also checks the optional CUDA toolkit at ${CUDA_PATH:-/usr/local/cuda} (nvcc, cudart, NCCL).
set -euo pipefail

PACKAGES=(
  # Build: Bazel 4.2.3 (offline, local repositories) + Java rules it needs, gcc 12.
  bazel-bootstrap bazel-rules-java g++ python3
  # Libraries (all linked from the system; see third_party/system_libs/BUILD).
  libabsl-dev libprotobuf-dev protobuf-compiler libgrpc++-dev protobuf-compiler-grpc
  librocksdb-dev prometheus-cpp-dev libgloo-dev libgtest-dev libgmock-dev libbenchmark-dev
  libeigen3-dev nlohmann-json3-dev
  # Logging (glog), command lines (CLI11), HTTP clients in tests and tools (cpp-httplib).
  libgoogle-glog-dev libcli11-dev libcpp-httplib-dev
  # Tests, demo and tooling: format check, plots, real Prometheus server + promtool, CPU
  # contention for compute fail-slows, HTTP scrapes, systemd unit verification.
  clang-format gnuplot-nox prometheus stress-ng curl systemd
  # libFuzzer for the controller ingest fuzz target (Debian gcc has none).
  clang libclang-rt-14-dev
  # The falcon Python package and its example job (docs/pytorch.md): PyTorch 1.13 (CPU, Gloo)
  # for Debian's system python3.
  python3-torch
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  if [ "$(id -u)" -ne 0 ]; then
    echo "install-deps: missing packages and not root; run as root: sudo $0" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  echo "install-deps: done"
else
  echo "install-deps: all ${#PACKAGES[@]} packages present"
fi

# `import falcon` for Debian's system python3: a .pth file naming this checkout's python/ folder
# (rewritten only when it names another checkout).
pth=/usr/lib/python3/dist-packages/falcon-checkout.pth
pkg="$(cd "$(dirname "${BASH_SOURCE[0]}")/../python" && pwd)"
if [ "$(cat "$pth" 2>/dev/null)" != "$pkg" ]; then
  if [ "$(id -u)" -eq 0 ] && [ -d "$(dirname "$pth")" ]; then
    echo "$pkg" >"$pth"
    echo "install-deps: the falcon Python package ($pkg) is importable by /usr/bin/python3"
  else
    echo "install-deps: NOTICE: not root: run with PYTHONPATH=$pkg for \`import falcon\`"
  fi
fi

cuda="${CUDA_PATH:-/usr/local/cuda}"
if [ -x "$cuda/bin/nvcc" ] && [ -f "$cuda/include/nccl.h" ] &&
   { [ -e "$cuda/lib64/libcudart.so" ] || [ -e "$cuda/lib/libcudart.so" ]; } &&
   { [ -e "$cuda/lib64/libnccl.so" ] || [ -e "$cuda/lib/libnccl.so" ] ||
     ldconfig -p | grep -q 'libnccl\.so'; }; then
  echo "install-deps: CUDA toolkit with NCCL found at $cuda: the CUDA/NCCL variant will be built" \
       "(it runs only where a GPU is present)"
else
  echo "install-deps: NOTICE: no CUDA toolkit with NCCL at $cuda (need bin/nvcc, include/nccl.h," \
       "libcudart, libnccl): only the CPU-only (Gloo) variant will be built"
fi
