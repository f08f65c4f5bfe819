#!/usr/bin/env bash
# The controller and the agent are one release: `--version` of each prints its name and the same
# version (common/version.h), which is also what each exports as build_info{version}.
# usage: version_test.sh PATH_TO_FALCON_CONTROLLER PATH_TO_FALCON_AGENT
set -euo pipefail
fail() { echo "FAIL: $*" >&2; exit 1; }
controller=$("$1" --version) || fail "falcon_controller --version: exit $?"
agent=$("$2" --version) || fail "falcon_agent --version: exit $?"
[[ "$controller" =~ ^falcon-controller\ ([0-9]+\.[0-9]+\.[0-9]+)$ ]] ||
  fail "falcon_controller --version: '$controller'"
cv="${BASH_REMATCH[1]}"
[[ "$agent" =~ ^falcon-agent\ ([0-9]+\.[0-9]+\.[0-9]+)$ ]] || fail "falcon_agent --version: '$agent'"
av="${BASH_REMATCH[1]}"
[ "$cv" = "$av" ] || fail "controller $cv, agent $av"
echo "PASS: both $cv"
