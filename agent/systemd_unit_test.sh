#!/usr/bin/env bash
# deploy/systemd/falcon-agent.service passes `systemd-analyze verify` (where available), with
# ExecStart pointed at the freshly built binary (the installed path need not exist here).
# usage: systemd_unit_test.sh UNIT_FILE FALCON_AGENT
set -euo pipefail
UNIT="$1"
AGENT="$(cd "$(dirname "$2")" && pwd)/$(basename "$2")"
grep -q '^ExecStart=/usr/local/bin/falcon-agent ' "$UNIT" || {
  echo "FAIL: ExecStart must run /usr/local/bin/falcon-agent" >&2
  exit 1
}
grep -q '^KillSignal=SIGTERM' "$UNIT" || { echo "FAIL: KillSignal=SIGTERM missing" >&2; exit 1; }
if ! command -v systemd-analyze >/dev/null; then
  echo "SKIP: systemd-analyze not installed; static checks passed"
  exit 0
fi
DIR="$(mktemp -d)"
trap 'rm -rf "$DIR"' EXIT
sed "s#/usr/local/bin/falcon-agent#$AGENT#" "$UNIT" >"$DIR/falcon-agent.service"
OUT=$(systemd-analyze verify "$DIR/falcon-agent.service" 2>&1) || {
  echo "FAIL: systemd-analyze verify:" >&2
  echo "$OUT" >&2
  exit 1
}
# verify exits 0 on some warnings; treat any line about our unit as a failure.
if grep -q "falcon-agent.service" <<<"$OUT"; then
  echo "FAIL: systemd-analyze verify warned:" >&2
  echo "$OUT" >&2
  exit 1
fi
echo PASS
