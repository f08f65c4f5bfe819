#!/usr/bin/env bash
# deploy/prometheus: `promtool check config` of prometheus.yml (with its rule files),
# `promtool check rules`, the rule unit tests of falcon_rules_test.yml (`promtool test rules`),
# and that the rules use only metric names the controller and agent export.
# usage: promtool_test.sh DIR_OF_prometheus.yml CHECKER METRICS_MD...
set -euo pipefail
source tests/testing/skip.sh
abs() { echo "$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"; }
DIR="$1"
CHECKER="$(abs "$2")"
shift 2
METRICS=()
for s in "$@"; do METRICS+=("$(abs "$s")"); done
PROMTOOL="${PROMTOOL:-/usr/bin/promtool}"
if [ ! -x "$PROMTOOL" ]; then
  falcon_skip_or_fail "$PROMTOOL is not installed (Debian package 'prometheus'; deploy/install-deps.sh)"
fi
WORK="$(mktemp -d "${TEST_TMPDIR:-/tmp}/promtool.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
# Real copies: promtool resolves rule_files relative to the config file.
cp -L "$DIR"/prometheus.yml "$DIR"/falcon_rules.yml "$DIR"/falcon_alerts.yml \
  "$DIR"/falcon_rules_test.yml "$WORK/"
mkdir -p "$WORK/targets"
cp -L "$DIR"/targets/*.yml "$WORK/targets/"
sed -i "s#/etc/prometheus/falcon/#$WORK/targets/#" "$WORK/prometheus.yml"

cd "$WORK"
echo "== promtool check config"
"$PROMTOOL" check config prometheus.yml
echo "== promtool check rules"
"$PROMTOOL" check rules falcon_rules.yml falcon_alerts.yml
echo "== promtool test rules"
"$PROMTOOL" test rules falcon_rules_test.yml

echo "== metric names"
python3 "$CHECKER" --metrics "${METRICS[@]}" --rules falcon_rules.yml \
  --exprs falcon_rules.yml falcon_alerts.yml falcon_rules_test.yml

# The checks can fail: a rule on a metric nobody exports, and a broken alert, are caught.
sed 's/falcon_controller_active_fail_slows) > 0/falcon_controller_active_fail_slowz) > 0/' falcon_alerts.yml >bad.yml
if python3 "$CHECKER" --metrics "${METRICS[@]}" --exprs bad.yml 2>/dev/null; then
  echo "FAIL: the metric-name check accepted falcon_controller_active_fail_slowz" >&2
  exit 1
fi
sed -i 's/for: 2m/for: 10m/' falcon_alerts.yml
if "$PROMTOOL" test rules falcon_rules_test.yml >/dev/null 2>&1; then
  echo "FAIL: the rule unit tests passed with FalconAgentDown delayed to 10m" >&2
  exit 1
fi
echo PASS
