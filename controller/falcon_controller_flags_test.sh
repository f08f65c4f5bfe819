#!/usr/bin/env bash
# The falcon_controller binary refuses bad flags before it starts: exit 2, a message naming the
# flag. Each case below used to start a controller (bounded by `timeout` here, so that a
# regression fails instead of hanging).
# usage: falcon_controller_flags_test.sh PATH_TO_FALCON_CONTROLLER
set -euo pipefail
CONTROLLER="$1"
DIR="$(mktemp -d "${TEST_TMPDIR:-/tmp}/falcon-controller-flags-XXXXXX")"
trap 'rm -rf "$DIR"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

expect_refused() {  # expect_refused PATTERN ARGS...
  local pattern="$1"
  shift
  set +e
  out=$(timeout 20 "$CONTROLLER" --listen=127.0.0.1:0 --metrics_listen= \
    --data_dir="$DIR/data" "$@" 2>&1)
  rc=$?
  set -e
  [ "$rc" = 2 ] || fail "$*: rc $rc (want 2): $out"
  grep -qF -- "$pattern" <<<"$out" || fail "$*: want '$pattern' in: $out"
  echo "ok   $*"
}

# Durations: finite and within the range --help states (--tick 1ns spun a core at 45%).
expect_refused "--tick: 1ns is not in [10ms, 1m]" --tick=1ns
expect_refused "--tick: inf is not in [10ms, 1m]" --tick=inf
expect_refused "--directive_delivery_latency: inf is not in [0, 10m]" \
  --directive_delivery_latency=inf
expect_refused "--directive_ack_timeout: 0 is not in [1s, 24h]" --directive_ack_timeout=0
expect_refused "--job_end_grace: inf is not in [1s, 168h]" --job_end_grace=inf
# Paths and names.
expect_refused "--s4_checkpoint_dir: must not be empty" --s4_checkpoint_dir=
expect_refused "--data_dir: must not be empty" --data_dir=
touch "$DIR/a-file"
expect_refused "--data_dir: '$DIR/a-file' exists and is not a directory" --data_dir="$DIR/a-file"
expect_refused "--controller_id: must be 1 to 256 bytes of UTF-8" --controller_id=$'\xff'
printf -- '-----BEGIN CERTIFICATE-----\n' >"$DIR/c.pem"
# Addresses.
expect_refused "--listen: '127.0.0.1:99999': port '99999' is not in [0, 65535]" \
  --listen=127.0.0.1:99999
expect_refused "--metrics_listen: '127.0.0.1:99999': port '99999' is not in [0, 65535]" \
  --metrics_listen=127.0.0.1:99999
# Counts.
expect_refused "--profiling_iterations: -1 is not in [1, 1000]" --profiling_iterations=-1
expect_refused "--detector_min_after: 11 is not in [1, 10]" --detector_min_after=11
expect_refused "--detector_recheck: -1 is not in [0, 10000]" --detector_recheck=-1
expect_refused "--validation_repeats: 0 is not in [1, 100]" --validation_repeats=0
expect_refused "--validation_pause_lead_iterations: 1001 is not in [0, 1000]" \
  --validation_pause_lead_iterations=1001
expect_refused "--validation_gemm_slow_ratio: nan is not in (0, 10]" \
  --validation_gemm_slow_ratio=nan
# TLS: the three files, or an explicit --plaintext.
expect_refused "--tls_cert, --tls_key, --tls_ca: required (or --plaintext for a local demo)"
expect_refused "--tls_key: required with the other TLS files" --tls_cert="$DIR/a-file" \
  --tls_ca="$DIR/a-file"
expect_refused "TLS certificate '$DIR/a-file': not a PEM file" --tls_cert="$DIR/a-file" \
  --tls_key="$DIR/a-file" --tls_ca="$DIR/a-file"
expect_refused "TLS CA '$DIR/none.pem'" --tls_cert="$DIR/c.pem" --tls_key="$DIR/c.pem" \
  --tls_ca="$DIR/none.pem"
expect_refused "--plaintext: not with --tls_cert, --tls_key, --tls_ca" --plaintext \
  --tls_cert="$DIR/a-file"
# A flags-only program: a stray argument is not ignored.
expect_refused "unexpected argument 'stray'" stray
[ -e "$DIR/data" ] && fail "a refused start created --data_dir"
echo PASS
