#!/usr/bin/env bash
# deploy/systemd/*.service: each unit runs its installed binary with the expected flags, stops with
# SIGTERM, restarts on failure and is hardened; the controller keeps RocksDB in its
# StateDirectory. Every flag in ExecStart is accepted by the freshly built binary (--help lists
# it), and `systemd-analyze verify` passes (where installed) with ExecStart pointed at that binary
# (the installed path need not exist here).
# usage: systemd_units_test.sh AGENT_UNIT FALCON_AGENT CONTROLLER_UNIT FALCON_CONTROLLER
set -euo pipefail
source tests/testing/skip.sh
abs() { echo "$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"; }
AGENT_UNIT="$1"
AGENT="$(abs "$2")"
CONTROLLER_UNIT="$3"
CONTROLLER="$(abs "$4")"
fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# unit installed-binary built-binary
check_static() {
  local unit="$1" installed="$2" built="$3"
  local name
  name="$(basename "$unit")"
  grep -q "^ExecStart=$installed " "$unit" || fail "$name: ExecStart must run $installed"
  for line in KillSignal=SIGTERM Restart=on-failure NoNewPrivileges=yes ProtectSystem=strict \
    ProtectHome=yes PrivateTmp=yes User=falcon WantedBy=multi-user.target; do
    grep -qx "$line" "$unit" || fail "$name: $line missing"
  done
  # Every --flag of ExecStart exists in the binary's --help.
  local help
  help="$("$built" --helpfull 2>&1 || "$built" --help 2>&1 || true)"
  for flag in $(grep '^ExecStart=' "$unit" | grep -o -- '--[a-z_]*'); do
    grep -q -- "${flag#--}" <<<"$help" || fail "$name: $built does not know $flag"
  done
}

check_static "$AGENT_UNIT" /usr/local/bin/falcon-agent "$AGENT"
check_static "$CONTROLLER_UNIT" /usr/local/bin/falcon-controller "$CONTROLLER"
# TLS by default: both daemons load their certificates as credentials, neither says --plaintext.
for unit in "$AGENT_UNIT" "$CONTROLLER_UNIT"; do
  grep -q -- '--plaintext' "$unit" && fail "$(basename "$unit"): --plaintext in a shipped unit"
  for flag in tls_cert tls_key tls_ca; do
    grep -q -- "--$flag %d/" "$unit" || fail "$(basename "$unit"): no --$flag from LoadCredential"
  done
  grep -q '^LoadCredential=ca.pem:/etc/falcon/tls/ca.pem$' "$unit" ||
    fail "$(basename "$unit"): the CA is not loaded with LoadCredential="
done
grep -qx 'StateDirectory=falcon-controller' "$CONTROLLER_UNIT" ||
  fail "falcon-controller.service: StateDirectory=falcon-controller missing"
grep -q -- '--data_dir /var/lib/falcon-controller' "$CONTROLLER_UNIT" ||
  fail "falcon-controller.service: --data_dir must be the StateDirectory /var/lib/falcon-controller"

if ! command -v systemd-analyze >/dev/null; then
  falcon_skip_or_fail "systemd-analyze is not installed (Debian package 'systemd'):" \
    "units not verified (static checks passed)"
fi
DIR="$(mktemp -d "${TEST_TMPDIR:-/tmp}/units.XXXXXX")"
trap 'rm -rf "$DIR"' EXIT
sed "s#/usr/local/bin/falcon-agent#$AGENT#" "$AGENT_UNIT" >"$DIR/falcon-agent.service"
sed "s#/usr/local/bin/falcon-controller#$CONTROLLER#" "$CONTROLLER_UNIT" \
  >"$DIR/falcon-controller.service"
for unit in falcon-agent.service falcon-controller.service; do
  OUT=$(systemd-analyze verify "$DIR/$unit" 2>&1) || fail "systemd-analyze verify $unit:
$OUT"
  # verify exits 0 on some warnings; treat any line about our unit as a failure.
  if grep -q "$unit" <<<"$OUT"; then
    fail "systemd-analyze verify warned about $unit:
$OUT"
  fi
done
echo PASS
