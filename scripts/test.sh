#!/usr/bin/env bash
# The test command: installs what the tests need from the lockfiles in this
# repository (tests/peers: npm servers, the Python SDK host), then runs the
# whole test suite and prints one closing line with the totals.
set -euo pipefail
cd "$(dirname "$0")/.."

tests/peers/install.sh

log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
cargo test --locked "$@" 2>&1 | tee "$log" || status=$?
passed=$(grep -E '^test result:' "$log" | grep -Eo '[0-9]+ passed' | awk '{s += $1} END {print s + 0}')
failed=$(grep -E '^test result:' "$log" | grep -Eo '[0-9]+ failed' | awk '{s += $1} END {print s + 0}')
echo
echo "tests: $passed passed, $failed failed"
exit "$status"
