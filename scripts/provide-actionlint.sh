#!/usr/bin/env bash
# Provides actionlint, the checker of GitHub Actions workflows that `npm run lint` runs on
# .github/workflows (scripts/lint-shell.sh). Built from Go modules once and cached per version, as
# scripts/provide-registry.sh does for the registry.
#
# Prints a shell assignment: ACTIONLINT=<path of the binary>.
# Reuses a binary the user already has: TEST_ASSET_ACTIONLINT.
set -euo pipefail
# A failure inside $(...) stops the script too (bash leaves errexit off there by default).
shopt -s inherit_errexit

ACTIONLINT_VERSION=${ACTIONLINT_VERSION:-v1.7.12}
# shellcheck source=scripts/build-lib.sh
. "$(dirname "$0")/build-lib.sh"

if [ -n "${TEST_ASSET_ACTIONLINT:-}" ]; then
  [ -x "$TEST_ASSET_ACTIONLINT" ] || die "TEST_ASSET_ACTIONLINT=$TEST_ASSET_ACTIONLINT is not an executable file"
  actionlint=$TEST_ASSET_ACTIONLINT
else
  actionlint=$(go_install_cached actionlint "$ACTIONLINT_VERSION" github.com/rhysd/actionlint/cmd/actionlint)
fi
printf 'ACTIONLINT=%q\n' "$actionlint"
