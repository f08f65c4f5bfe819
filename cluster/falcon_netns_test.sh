#!/bin/bash
# The falcon_netns binary: usage errors exit 2 naming the flag; where this machine lets the test
# create namespaces (root, no sandbox: see BUILD), create --detach / cleanup / destroy and
# create until SIGTERM leave nothing behind.
set -u
BIN="$1"
source tests/testing/skip.sh
fail=0
check() {  # check NAME EXPECTED_RC PATTERN -- command...
  local name="$1" want_rc="$2" pattern="$3"
  shift 4
  local out rc
  out="$("$@" 2>&1)"
  rc=$?
  if [[ "$rc" != "$want_rc" ]] || ! grep -qE -- "$pattern" <<<"$out"; then
    echo "FAIL $name: rc=$rc (want $want_rc), output:"
    echo "$out"
    fail=1
  else
    echo "ok   $name"
  fi
}

check help 0 '--nodes \(create: number of nodes' -- "$BIN" --help
check no-subcommand 2 'missing subcommand' -- "$BIN"
check unknown-subcommand 2 "unknown subcommand 'make'" -- "$BIN" make
check extra-argument 2 "unexpected argument 'x'" -- "$BIN" cleanup x
check unknown-flag 2 'unknown flag --bogus' -- "$BIN" create --bogus=1
check bad-nodes-value 2 '--nodes: .*abc' -- "$BIN" create --nodes abc
check nodes-range 2 '--nodes: 0 is not in \[1, 253\]' -- "$BIN" create --nodes=0
check nodes-range-high 2 '--nodes: 254 is not in \[1, 253\]' -- "$BIN" create --nodes=254
check detach-needs-spec 2 '--detach needs --spec_out' -- "$BIN" create --detach
check destroy-needs-spec 2 'destroy needs --spec PATH' -- "$BIN" destroy
check destroy-missing-file 1 'no-such.json' -- "$BIN" destroy --spec "$TEST_TMPDIR/no-such.json"

if ! why="$("$BIN" check 2>&1)"; then
  [ "$fail" = 0 ] || exit 1
  falcon_skip_or_fail "$why"
fi

# Links and namespaces whose names start with $1.
leftovers() { { ls /sys/class/net; ls /run/netns 2>/dev/null; } | grep -c "^$1" ; }

SPEC="$TEST_TMPDIR/cluster.json"
check create-detach 0 '"kind":"netns"' -- "$BIN" create --nodes 2 --spec_out "$SPEC" --detach
prefix="$(sed -E 's/.*"prefix":"([^"]+)".*/\1/' "$SPEC")"
[ "$(leftovers "$prefix")" = 5 ] || { echo "FAIL detached cluster: $(leftovers "$prefix") objects"; fail=1; }
check cleanup-keeps-detached 0 "kept $prefix: detached" -- "$BIN" cleanup
check destroy 0 "destroyed $prefix \(2 nodes\)" -- "$BIN" destroy --spec "$SPEC"
[ "$(leftovers "$prefix")" = 0 ] || { echo "FAIL destroy left $(leftovers "$prefix")"; fail=1; }
check destroy-again 0 "destroyed $prefix" -- "$BIN" destroy --spec "$SPEC"

# Up until SIGTERM, then removed together with its spec file.
SPEC2="$TEST_TMPDIR/cluster2.json"
"$BIN" create --nodes 3 --spec_out "$SPEC2" >"$TEST_TMPDIR/create.out" 2>&1 &
pid=$!
for _ in $(seq 600); do [ -s "$SPEC2" ] && break; sleep 0.1; done
if [ ! -s "$SPEC2" ]; then
  echo "FAIL create wrote no spec: $(cat "$TEST_TMPDIR/create.out")"
  kill -KILL "$pid"
  exit 1
fi
prefix2="$(sed -E 's/.*"prefix":"([^"]+)".*/\1/' "$SPEC2")"
[ "$(leftovers "$prefix2")" = 7 ] || { echo "FAIL live cluster: $(leftovers "$prefix2")"; fail=1; }
check destroy-held 1 'still held by its creator' -- "$BIN" destroy --spec "$SPEC2"
kill -TERM "$pid"
wait "$pid"
rc=$?
[ "$rc" = 0 ] || { echo "FAIL create after SIGTERM: rc $rc: $(cat "$TEST_TMPDIR/create.out")"; fail=1; }
[ "$(leftovers "$prefix2")" = 0 ] || { echo "FAIL SIGTERM left $(leftovers "$prefix2")"; fail=1; }
[ ! -e "$SPEC2" ] || { echo "FAIL the spec file of a destroyed cluster remains"; fail=1; }
grep -q "destroyed in" "$TEST_TMPDIR/create.out" || { echo "FAIL: $(cat "$TEST_TMPDIR/create.out")"; fail=1; }
exit "$fail"
