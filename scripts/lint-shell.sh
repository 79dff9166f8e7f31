#!/usr/bin/env bash
# Lints the project's shell scripts with shellcheck (scripts/, .ci/run and the set-up stand-ins of
# test/e2e/setup-scripts.test.ts) and the GitHub Actions workflows with actionlint (their `run:`
# scripts through shellcheck too), the second half of `npm run lint`. Uses Debian's shellcheck,
# installed when missing (as root, as scripts/node-packages.sh does; otherwise it says what to
# install), and actionlint built from Go modules once (scripts/provide-actionlint.sh).
set -euo pipefail
shopt -s inherit_errexit
cd "$(dirname "$0")/.."

if ! command -v shellcheck >/dev/null 2>&1; then
  if [ "$(id -u)" != 0 ]; then
    echo "lint-shell.sh: shellcheck is not installed; install it as root (apt-get install shellcheck)" >&2
    exit 1
  fi
  echo "lint-shell.sh: installing Debian's shellcheck" >&2
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends shellcheck >&2
fi

# Every level (style included); .shellcheckrc says where sourced files are.
shellcheck scripts/*.sh .ci/run test/fixtures/setup-standins/*

# Expressions, contexts, permissions, action inputs and the run: scripts of every workflow.
eval "$(bash scripts/provide-actionlint.sh)"
"$ACTIONLINT" -no-color -shellcheck "$(command -v shellcheck)"
