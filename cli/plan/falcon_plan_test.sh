#!/bin/bash
# End-to-end test of the falcon_plan binary: output, exit codes and error messages.
set -u
BIN="$1"
DATA="cli/plan/testdata"
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

check s2-json 0 '^\{"m":\[10,8,6,8\],"makespan":10\.0,"predicted_speedup":1\.2' -- \
  "$BIN" s2 --times 1,1,1.5,1 --micro-batches 32 --multiple 2 --json
check s2-table 0 'predicted speedup 1\.200x' -- \
  "$BIN" s2 --times=1,1,1.5,1 --micro-batches=32 --multiple=2
check s2-exclude 0 '"makespan":12\.0,"predicted_speedup":2\.0,"baseline_makespan":24\.0' -- \
  "$BIN" s2 --times 1,1,3,1 --micro-batches 32 --multiple 2 --exclude 2 --json
check s2-nan 1 'error: --times\[1\]: is NaN' -- \
  "$BIN" s2 --times 1,nan --micro-batches 4
check s2-multiple 1 'error: --micro-batches: 5 is not a multiple of multiple = 2' -- \
  "$BIN" s2 --times 1,1 --micro-batches 5 --multiple 2
check layer-split 0 'S2 alone 0\.1520 s \(recovers 0\.75 of the slowdown\), re-partition \+ S2 0\.1440 s \(recovers 0\.88\)' -- \
  "$BIN" layer-split --dp 4 --pp 2 --layers 16 --layer-compute-s 0.001 --micro-batches 64 \
  --slow-cells 2.0:1.5 --p2p-s 0 --allreduce-s 0
check layer-split-json 0 '"first_layer":\[0,6\],"micro_batches":13' -- \
  "$BIN" layer-split --dp 4 --pp 2 --layers 16 --layer-compute-s 0.001 --micro-batches 64 \
  --slow-cells 2.0:1.5 --p2p-s 0 --allreduce-s 0 --json
check layer-split-cell 1 'error: --slow-cells\[0\]: cell 5\.0 is outside dp 4 x pp 2' -- \
  "$BIN" layer-split --dp 4 --pp 2 --layers 16 --layer-compute-s 0.001 --micro-batches 64 \
  --slow-cells 5.0:1.5
check layer-split-memory 1 'error: no split of 16 layers into 2 stages fits' -- \
  "$BIN" layer-split --dp 4 --pp 2 --layers 16 --layer-compute-s 0.001 --micro-batches 64 \
  --layer-memory-bytes 1 --stage-memory-bytes 7
check layer-split-dp 1 'error: --dp: 0 is not in' -- \
  "$BIN" layer-split --pp 2 --layers 16 --layer-compute-s 0.001 --micro-batches 64
check s3-json 0 '"slow_links_in_dp":\{"before":1,"after":0\}' -- \
  "$BIN" s3 --layout "$DATA/four_nodes.csv" --slow-links 2-6:4 --json
check s3-json-layout 0 '"slow_links_in_pp":\{"before":0,"after":1\}' -- \
  "$BIN" s3 --layout "$DATA/two_nodes.json" --slow-links 0-2:3 --json
check s3-missing 1 'error: --layout: /nope\.csv: cannot open' -- \
  "$BIN" s3 --layout /nope.csv
check s3-bad-rank 1 'error: --slow-ranks\[0\]\.rank: 42 is not a rank' -- \
  "$BIN" s3 --layout "$DATA/four_nodes.csv" --slow-ranks 42
check s3-replica-micro-batches 1 'error: --replica-micro-batches: must be in \[1, 1000000\]' -- \
  "$BIN" s3 --layout "$DATA/four_nodes.csv" --slow-links 2-6:4 --replica-micro-batches 9000000000000000000
check escalate 0 'apply  S2 micro-batch .*lost 5\.00s >= S2 micro-batch cost 5\.00s' -- \
  "$BIN" escalate --trace "$DATA/trace.csv"
check escalate-json 0 '"events":2' -- "$BIN" escalate --trace "$DATA/trace.csv" --json
# Hostile input: each of these aborted (exit 134) or read without bound before.
TMP="${TEST_TMPDIR:-/tmp}"
printf '{"layout":[{"rank":0,"node":"a","dp":1e400,"pp":0,"tp":0}]}' >"$TMP/overflow.json"
check s3-number-overflow 1 \
  "error: $TMP/overflow.json: not valid JSON at line 1, column 42 \(byte 42\), at layout\[0\]\.dp: number overflow parsing '1e400'" -- \
  "$BIN" s3 --layout "$TMP/overflow.json"
printf '[{"rank":18446744073709551615,"node":"a","dp":0,"pp":0,"tp":0}]' >"$TMP/huge_rank.json"
check s3-huge-rank 1 "\[0\]\.rank: 18446744073709551615 is out of range" -- \
  "$BIN" s3 --layout "$TMP/huge_rank.json"
printf 'rank,node,dp,pp,tp\n0,n\xff,0,0,0\n1,n\xfe,1,0,0\n' >"$TMP/latin1.csv"
check s3-non-utf8-node-json 0 $'"node":"n\xef\xbf\xbd"' -- "$BIN" s3 --layout "$TMP/latin1.csv" --json
check s3-endless-layout 1 'error: --layout: /dev/zero: larger than the limit of 67108864 bytes \(--max-input-bytes\)' -- \
  "$BIN" s3 --layout /dev/zero
check escalate-endless-trace 1 'error: --trace: /dev/zero: larger than the limit of 4096 bytes \(--max-input-bytes\)' -- \
  "$BIN" escalate --trace /dev/zero --max-input-bytes 4096
check escalate-directory 1 "error: --trace: $TMP: is a directory, not a file" -- "$BIN" escalate --trace "$TMP"
check max-input-bytes-range 1 'error: --max-input-bytes: 0 is not in \[1, 68719476736\]' -- \
  "$BIN" s3 --layout "$DATA/four_nodes.csv" --max-input-bytes 0
check stray-argument 2 "falcon_plan: unexpected argument 'stray'" -- \
  "$BIN" s3 --layout "$DATA/four_nodes.csv" stray
# Every `./falcon plan` example of the README runs as written from the repository root.
n=0
while IFS= read -r line; do
  n=$((n + 1))
  read -r -a words <<<"${line#./falcon plan }"
  check "readme-example-$n" 0 '.' -- "$BIN" "${words[@]}"
done < <(grep '^\./falcon plan ' cli/plan/README.md)
[[ "$n" -ge 4 ]] || { echo "FAIL readme-examples: found $n"; fail=1; }
check help 0 '^falcon_plan: plan Falcon.s mitigations offline' -- "$BIN" --help
check help-flags 0 '--replica-micro-batches .*default: 8' -- "$BIN" --help
check help-logging-line 0 '^Logging: glog' -- "$BIN" --help
check help-short 0 '--slow-links' -- "$BIN" -h
check help-subcommand 0 'falcon_plan s2 --times' -- "$BIN" s2 --help
check no-command 2 'falcon_plan s2 --times' -- "$BIN"
check bad-command 2 "unknown subcommand 'plan'" -- "$BIN" plan
exit $fail
