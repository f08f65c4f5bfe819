#!/usr/bin/env bash
# `BINARY --help` (and -h) exits 0, prints the usage and lists every given flag with its default;
# never Abseil's "No flags matched".
# usage: help_flag_test.sh PATH_TO_BINARY FLAG...   (FLAG without dashes, e.g. data_dir)
set -euo pipefail
BIN="$1"
shift
fail() { echo "FAIL: $*" >&2; exit 1; }
for arg in --help -h; do
  set +e
  out=$("$BIN" "$arg" 2>&1)
  rc=$?
  set -e
  [ "$rc" = 0 ] || fail "$arg: exit status $rc: $out"
  grep -q "No flags matched" <<<"$out" && fail "$arg: $out"
  grep -q "^Flags:" <<<"$out" || fail "$arg: no Flags: section: $out"
  for flag in "$@"; do
    grep -q -- "^  --$flag (.*) default: " <<<"$out" || fail "$arg: --$flag not listed: $out"
  done
done
echo PASS
