#!/usr/bin/env bash
# The falcon_agent binary: flags + config file, socket mode, /metrics, SIGTERM drain, bad input.
# usage: falcon_agent_binary_test.sh PATH_TO_FALCON_AGENT
set -euo pipefail
AGENT="$1"
DIR="$(mktemp -d /tmp/falcon-agent-bin-XXXXXX)"  # Short path: unix sockets are limited.
PID=""
cleanup() {
  [ -n "$PID" ] && kill -KILL "$PID" 2>/dev/null || true
  rm -rf "$DIR"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; [ -f "$DIR/out" ] && cat "$DIR/out" >&2; exit 1; }

# Bad input exits 2 and names the setting.
set +e
out=$("$AGENT" 2>&1); rc=$?
set -e
[ "$rc" = 2 ] || fail "no --controller: rc $rc"
grep -q "controller: required" <<<"$out" || fail "no --controller: $out"
set +e
out=$("$AGENT" --controller 127.0.0.1:1 --buffer_batches=lots 2>&1); rc=$?
set -e
[ "$rc" = 2 ] || fail "bad --buffer_batches: rc $rc"
grep -q "buffer_batches" <<<"$out" || fail "bad --buffer_batches: $out"
echo "bogus = 1" > "$DIR/bad.conf"
set +e
out=$("$AGENT" --controller 127.0.0.1:1 --config "$DIR/bad.conf" 2>&1); rc=$?
set -e
[ "$rc" = 2 ] || fail "bad config: rc $rc"
grep -q "bad.conf:1: bogus: unknown setting" <<<"$out" || fail "bad config: $out"

# A config file, overridden by a flag. No controller listens on port 1: the agent keeps retrying.
cat > "$DIR/agent.conf" <<CONF
# test config
node = conf-node
summary_interval = 50ms
drain_timeout = 0.2
metrics_listen = 127.0.0.1:9
CONF
"$AGENT" --controller 127.0.0.1:1 --config "$DIR/agent.conf" --socket "$DIR/agent.sock" \
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

# Scrape /metrics over HTTP.
HOST=${ADDR%:*}
PORT=${ADDR##*:}
exec 3<>"/dev/tcp/$HOST/$PORT"
printf 'GET /metrics HTTP/1.0\r\nHost: %s\r\n\r\n' "$ADDR" >&3
BODY=$(cat <&3)
exec 3<&-
grep -q "200 OK" <<<"$BODY" || fail "HTTP status: $(head -1 <<<"$BODY")"
grep -q '^falcon_agent_build_info{.*version="0.1.0"' <<<"$BODY" || fail "no build info"
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
echo PASS
