#!/usr/bin/env bash
# deploy/grafana/falcon-dashboard.json parses as a Grafana dashboard, every panel query uses only
# metric names the controller and agent export (or recording rules of falcon_rules.yml), and every
# query is valid PromQL (`promtool check rules` on them, Grafana variables substituted).
# usage: dashboard_test.sh DASHBOARD RULES CHECKER METRICS_MD...
set -euo pipefail
source tests/testing/skip.sh
DASH="$1"
RULES="$2"
CHECKER="$3"
shift 3
WORK="$(mktemp -d "${TEST_TMPDIR:-/tmp}/dashboard.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT

python3 "$CHECKER" --metrics "$@" --rules "$RULES" --dashboard "$DASH" \
  --emit_rules "$WORK/dashboard_rules.yml"
grep -q 'expr:' "$WORK/dashboard_rules.yml" || { echo "FAIL: no expressions emitted" >&2; exit 1; }
promtool_missing=0
if [ -x /usr/bin/promtool ]; then
  /usr/bin/promtool check rules "$WORK/dashboard_rules.yml"
else
  promtool_missing=1
fi

# The check can fail: a panel on a metric nobody exports, and a file that does not parse.
sed 's/falcon_agent_compute_time_seconds/falcon_agent_compute_seconds/' "$DASH" >"$WORK/bad.json"
if python3 "$CHECKER" --metrics "$@" --rules "$RULES" --dashboard "$WORK/bad.json" 2>/dev/null; then
  echo "FAIL: the check accepted falcon_agent_compute_seconds" >&2
  exit 1
fi
head -c 200 "$DASH" >"$WORK/truncated.json"
if python3 "$CHECKER" --metrics "$@" --dashboard "$WORK/truncated.json" 2>/dev/null; then
  echo "FAIL: the check accepted a truncated dashboard" >&2
  exit 1
fi
if ((promtool_missing)); then
  falcon_skip_or_fail "/usr/bin/promtool is not installed (Debian package 'prometheus';" \
    "deploy/install-deps.sh): PromQL syntax not checked (metric-name checks passed)"
fi
echo PASS
