#!/usr/bin/env bash
# The falcon_agent binary: flags + config file, socket mode, /metrics, SIGTERM drain, bad input.
# usage: falcon_agent_binary_test.sh PATH_TO_FALCON_AGENT
set -euo pipefail
AGENT="$1"
DIR="$(mktemp -d /tmp/falcon-agent-bin-XXXXXX)"  # Short path: unix sockets are limited.
PID=""
OLD_PID=""
NEW_PID=""
cleanup() {
  for p in $PID $OLD_PID $NEW_PID; do kill -KILL "$p" 2>/dev/null || true; done
  rm -rf "$DIR"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; [ -f "$DIR/out" ] && cat "$DIR/out" >&2; exit 1; }

# --help exits 0 and lists the flags with their defaults.
out=$("$AGENT" --help 2>&1) || fail "--help: exit status $?: $out"
grep -q -- "^  --socket (.*) default: " <<<"$out" || fail "--help lists no --socket: $out"
grep -q -- "^  --controller (.*) default: " <<<"$out" || fail "--help lists no --controller: $out"

# Bad input exits 2 and names the setting.
set +e
out=$("$AGENT" 2>&1); rc=$?
set -e
[ "$rc" = 2 ] || fail "no --controller: rc $rc"
grep -q "controller: required" <<<"$out" || fail "no --controller: $out"
set +e
out=$("$AGENT" --plaintext=true --controller 127.0.0.1:1 --buffer_batches=lots 2>&1); rc=$?
set -e
[ "$rc" = 2 ] || fail "bad --buffer_batches: rc $rc"
grep -q "buffer_batches" <<<"$out" || fail "bad --buffer_batches: $out"
echo "bogus = 1" > "$DIR/bad.conf"
set +e
out=$("$AGENT" --plaintext=true --controller 127.0.0.1:1 --config "$DIR/bad.conf" 2>&1); rc=$?
set -e
[ "$rc" = 2 ] || fail "bad config: rc $rc"
grep -q "bad.conf:1: bogus: unknown setting" <<<"$out" || fail "bad config: $out"

# Out-of-range values exit 2 naming the setting; each of these used to start an agent (bounded
# by `timeout` here so that a regression fails instead of hanging).
expect_refused() {  # expect_refused PATTERN ARGS...
  local pattern="$1"
  shift
  set +e
  out=$(timeout 20 "$AGENT" --socket "$DIR/refused.sock" "$@" 2>&1)
  rc=$?
  set -e
  [ "$rc" = 2 ] || fail "$*: rc $rc (want 2): $out"
  grep -qF -- "$pattern" <<<"$out" || fail "$*: want '$pattern' in: $out"
}
C="--controller=127.0.0.1:1"
expect_refused "heartbeat_interval: 'inf' is not a finite duration" $C --heartbeat_interval=inf
expect_refused "heartbeat_interval: 1ns is not in [10ms, 10m]" $C --heartbeat_interval=1ns
expect_refused "drain_timeout: 'inf' is not a finite duration" $C --drain_timeout=inf
expect_refused "job_idle_timeout: 0 is not in [1s, 168h]" $C --job_idle_timeout=0
expect_refused "controller: '127.0.0.1:99999': port '99999' is not in [1, 65535]" \
  --controller=127.0.0.1:99999
expect_refused "controller: required" --controller=
expect_refused "metrics_listen: '127.0.0.1:99999': port '99999' is not in [0, 65535]" $C \
  --metrics_listen=127.0.0.1:99999
expect_refused "node: must be 1 to 256 bytes of UTF-8" $C --node=$'\xff'
expect_refused "unexpected argument 'stray'" $C stray
expect_refused "config $DIR: is a directory, not a file" $C --config "$DIR"
# TLS by default: the three files, or plaintext said explicitly.
expect_refused "tls_cert, tls_key, tls_ca: required (or plaintext for a local demo)" $C
expect_refused "tls_key: required with the other TLS files" $C --tls_cert="$DIR/x.pem" \
  --tls_ca="$DIR/x.pem"
expect_refused "plaintext: not with tls_cert, tls_key, tls_ca" $C --plaintext=true \
  --tls_ca="$DIR/x.pem"
# A bare --plaintext is true, as for the controller and falconctl, and takes no value from the
# next argument.
expect_refused "plaintext: not with tls_cert, tls_key, tls_ca" $C --plaintext \
  --tls_ca="$DIR/x.pem"

# An empty --metrics_listen disables /metrics (it bound 0.0.0.0:9464, the default).
"$AGENT" --plaintext --controller 127.0.0.1:1 --socket "$DIR/nometrics.sock" --metrics_listen= \
  --drain_timeout 0.2 >"$DIR/out" 2>&1 &
PID=$!
for _ in $(seq 1 200); do
  grep -q "shim socket" "$DIR/out" && break
  kill -0 "$PID" 2>/dev/null || fail "agent with --metrics_listen= exited early"
  sleep 0.1
done
grep -q "shim socket" "$DIR/out" || fail "agent with --metrics_listen= did not start"
grep -q "^metrics on" "$DIR/out" && fail "--metrics_listen= still serves /metrics"
grep -q "plaintext gRPC to the controller 127.0.0.1:1" "$DIR/out" || fail "no plaintext warning"
kill -TERM "$PID"
wait "$PID" || fail "agent with --metrics_listen=: exit code $?"
PID=""

# A config file, overridden by a flag. No controller listens on port 1: the agent keeps retrying.
cat > "$DIR/agent.conf" <<CONF
# test config
node = conf-node
summary_interval = 50ms
drain_timeout = 0.2
metrics_listen = 127.0.0.1:9
CONF
"$AGENT" --plaintext=true --controller 127.0.0.1:1 --config "$DIR/agent.conf" --socket "$DIR/agent.sock" \
  --metrics_listen 127.0.0.1:0 >"$DIR/out" 2>&1 &
PID=$!
for _ in $(seq 1 200); do
  grep -q "^metrics on " "$DIR/out" && break
  kill -0 "$PID" 2>/dev/null || fail "agent exited early"
  sleep 0.1
done
ADDR=$(sed -n 's/^metrics on //p' "$DIR/out")
[ -n "$ADDR" ] || fail "no 'metrics on' line"
grep -q "node conf-node" "$DIR/out" || fail "config file node not applied"
[ "$(stat -c %a "$DIR/agent.sock")" = 660 ] || fail "socket mode $(stat -c %a "$DIR/agent.sock")"

# A second agent on the same socket is refused (exit 1, naming the path); the first keeps its
# socket file.
INODE=$(stat -c %i "$DIR/agent.sock")
set +e
out=$("$AGENT" --plaintext=true --controller 127.0.0.1:1 --socket "$DIR/agent.sock" --metrics_listen 127.0.0.1:0 2>&1)
rc=$?
set -e
[ "$rc" = 1 ] || fail "second agent on the socket: rc $rc: $out"
grep -q "another agent is serving $DIR/agent.sock" <<<"$out" || fail "second agent: $out"
[ "$(stat -c %i "$DIR/agent.sock" 2>/dev/null)" = "$INODE" ] ||
  fail "second agent replaced or removed the first agent's socket"

# Scrape /metrics over HTTP (curl --fail: a status other than 2xx is an error).
command -v curl >/dev/null || fail "curl is not installed (deploy/install-deps.sh installs it)"
BODY=$(curl --silent --show-error --fail --max-time 10 "http://$ADDR/metrics" 2>&1) ||
  fail "GET http://$ADDR/metrics: $BODY"
VERSION=$("$AGENT" --version | awk '{print $2}')  # "falcon-agent X.Y.Z" (common/version.h)
[ -n "$VERSION" ] || fail "--version printed no version"
grep -q "^falcon_agent_build_info{.*version=\"$VERSION\"" <<<"$BODY" ||
  fail "no build info with version $VERSION"
grep -q '^falcon_agent_controller_connected{node="conf-node"} 0' <<<"$BODY" ||
  fail "controller_connected not 0"

# SIGTERM drains and exits 0.
kill -TERM "$PID"
for _ in $(seq 1 100); do
  kill -0 "$PID" 2>/dev/null || break
  sleep 0.1
done
kill -0 "$PID" 2>/dev/null && fail "still running 10 s after SIGTERM"
set +e
wait "$PID"; rc=$?
set -e
PID=""
[ "$rc" = 0 ] || fail "exit code $rc after SIGTERM"
grep -q "SIGTERM received, draining" "$DIR/out" || fail "no drain message"
[ -e "$DIR/agent.sock" ] && fail "socket file left behind"

# A stale socket file (its agent was killed) is replaced. An agent whose socket file was replaced
# by another agent's leaves that one in place when it exits.
start_agent() {  # start_agent OUTFILE: runs an agent on $DIR/s.sock, sets PID, waits for it.
  "$AGENT" --plaintext=true --controller 127.0.0.1:1 --socket "$DIR/s.sock" --metrics_listen 127.0.0.1:0 \
    --drain_timeout 0.2 >"$1" 2>&1 &
  PID=$!
  for _ in $(seq 1 200); do
    grep -q "shim socket" "$1" && return 0
    kill -0 "$PID" 2>/dev/null || { cat "$1" >&2; fail "agent exited early"; }
    sleep 0.1
  done
  fail "agent did not start: $(cat "$1")"
}
start_agent "$DIR/out1"
kill -KILL "$PID"
wait "$PID" 2>/dev/null || true
[ -S "$DIR/s.sock" ] || fail "killed agent left no socket file (test premise)"
start_agent "$DIR/out2"
OLD_PID=$PID
rm "$DIR/s.sock"
start_agent "$DIR/out3"
NEW_PID=$PID
INODE=$(stat -c %i "$DIR/s.sock")
kill -TERM "$OLD_PID"
wait "$OLD_PID" || fail "replaced agent: exit code $?"
OLD_PID=""
[ "$(stat -c %i "$DIR/s.sock" 2>/dev/null)" = "$INODE" ] ||
  fail "exiting agent removed the socket file of the agent now serving the path"
set +e
out=$("$AGENT" --plaintext=true --controller 127.0.0.1:1 --socket "$DIR/s.sock" --metrics_listen 127.0.0.1:0 2>&1)
rc=$?
set -e
[ "$rc" = 1 ] || fail "serving agent no longer reachable through its socket: rc $rc: $out"
PID=$NEW_PID
kill -TERM "$PID"
wait "$PID" || fail "last agent: exit code $?"
PID=""
NEW_PID=""
[ -e "$DIR/s.sock" ] && fail "socket file left behind by the last agent"
echo PASS
