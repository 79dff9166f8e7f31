#!/usr/bin/env bash
# Provides cosign (Sigstore's signing tool) for the release test (test/e2e/node-e2e.test.ts), which
# signs the released image and chart with a key pair, attaches the SBOM, and verifies both before
# installing by digest. Built from Go modules once and cached per version, as
# scripts/provide-registry.sh does for the registry. The release workflow
# (.github/workflows/release.yml) signs with the same major version, keyless.
#
# Prints a shell assignment: COSIGN=<path of the binary>.
# Reuses a binary the user already has: TEST_ASSET_COSIGN.
set -euo pipefail
# A failure inside $(...) stops the script too (bash leaves errexit off there by default).
shopt -s inherit_errexit

COSIGN_VERSION=${COSIGN_VERSION:-v3.1.3}
# shellcheck source=scripts/build-lib.sh
. "$(dirname "$0")/build-lib.sh"

if [ -n "${TEST_ASSET_COSIGN:-}" ]; then
  [ -x "$TEST_ASSET_COSIGN" ] || die "TEST_ASSET_COSIGN=$TEST_ASSET_COSIGN is not an executable file"
  cosign=$TEST_ASSET_COSIGN
else
  cosign=$(go_install_cached cosign "$COSIGN_VERSION" github.com/sigstore/cosign/v3/cmd/cosign)
fi
printf 'COSIGN=%q\n' "$cosign"
