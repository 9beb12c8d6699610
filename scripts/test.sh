#!/usr/bin/env bash
# The test command: installs what the tests need from the lockfiles in this
# repository, then runs the whole test suite. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

# Peers for the end-to-end tests (npm servers, Python SDK host), when the
# repository has them.
if [ -x tests/peers/install.sh ]; then
  tests/peers/install.sh
fi

cargo test --locked "$@"
