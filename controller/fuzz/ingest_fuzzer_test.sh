#!/usr/bin/env bash
# Runs the libFuzzer target for a bounded time on the seed corpus; fails on any crash, leak of an
# invariant (abort) or ASan report. Usage: ingest_fuzzer_test.sh FUZZER SEED_MAKER [SECONDS]
set -euo pipefail
fuzzer="$1"
seeds="$2"
seconds="${3:-20}"
corpus="${TEST_TMPDIR:-$(mktemp -d)}/corpus"
mkdir -p "$corpus"
"$seeds" "$corpus"
log="${TEST_TMPDIR:-/tmp}/fuzz.log"
if ! ASAN_OPTIONS=detect_leaks=0 "$fuzzer" "$corpus" -seed=1 -max_total_time="$seconds" \
    -timeout=20 -rss_limit_mb=3072 -max_len=262144 -print_final_stats=1 >"$log" 2>&1; then
  tail -n 60 "$log"
  echo "ingest fuzzer failed" >&2
  exit 1
fi
grep -E "^(#[0-9]+ +DONE|Done|stat::number_of_executed_units|stat::peak_rss_mb)" "$log" || true
grep -q "Done" "$log"
