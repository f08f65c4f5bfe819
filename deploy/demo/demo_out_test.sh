#!/usr/bin/env bash
# falcon_demo --out DIR replaces DIR/run on every run, but only a run folder it made itself
# (.falcon-demo-run inside): a DIR/run of the user's is refused (exit 2, naming it) and kept.
set -euo pipefail
demo="$1"
# A short path: under a long one (> 70 bytes with /run) the demo works in a folder of its own
# under /tmp and leaves DIR/run alone.
dir="$(mktemp -d /tmp/fdo.XXXXXX)"
trap 'rm -rf "$dir"' EXIT
mkdir -p "$dir/run/precious"
echo data >"$dir/run/precious/thesis.txt"
rc=0
out="$("$demo" --out "$dir" --cluster loopback --scenario healthy --iterations 100 2>&1)" || rc=$?
if [ "$rc" -ne 2 ]; then
  echo "FAIL: expected exit 2, got $rc: $out"
  exit 1
fi
case "$out" in
  *"$dir/run exists and is not a folder falcon_demo made"*) ;;
  *) echo "FAIL: the error does not name the folder: $out"; exit 1 ;;
esac
if [ "$(cat "$dir/run/precious/thesis.txt")" != data ]; then
  echo "FAIL: the user's file is gone"
  exit 1
fi
echo PASS
