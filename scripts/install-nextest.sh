#!/usr/bin/env bash
# Installs cargo-nextest, the test runner of scripts/test.sh, from crates.io (pinned, built from
# source: a fresh machine reaches crates.io but not GitHub's release downloads). Does nothing
# when a cargo-nextest is already on the PATH.
set -euo pipefail
NEXTEST_VERSION=0.9.143
if ! cargo nextest --version >/dev/null 2>&1; then
  echo "installing cargo-nextest $NEXTEST_VERSION from crates.io" >&2
  cargo install --locked --quiet --version "$NEXTEST_VERSION" cargo-nextest
fi
