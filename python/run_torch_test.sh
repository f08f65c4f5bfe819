#!/usr/bin/env bash
# Runs a Python test of the falcon package with Debian's system python3 (/usr/bin/python3: the one
# python3-torch installs into), the package and libfalcon_shim.so from this test's runfiles.
# Without torch the test is skipped, and fails under CI=true (tests/testing/skip.sh).
set -euo pipefail
source tests/testing/skip.sh
PY=/usr/bin/python3
[ -x "$PY" ] || falcon_skip_or_fail "$PY is missing (Debian's python3; ./falcon setup installs it)"
"$PY" -c "import torch, torch.distributed" 2>/dev/null ||
  falcon_skip_or_fail "python3-torch is not installed for $PY (./falcon setup installs it)"
export PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}"
export FALCON_SHIM_LIB="$PWD/trainer_shim/libfalcon_shim.so"
export PYTHONDONTWRITEBYTECODE=1
exec "$PY" "$@"
