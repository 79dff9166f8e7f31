#!/usr/bin/env bash
# Provides an OCI registry for the release test (test/e2e/node-e2e.test.ts): distribution's
# `registry` (the reference implementation behind Docker Hub and most self-hosted registries),
# built from Go modules once and cached per version, as scripts/provide-binaries.sh does for
# kube-apiserver. Only the filesystem and in-memory storage drivers are linked in.
#
# Prints a shell assignment: REGISTRY=<path of the binary>.
# Reuses a binary the user already has: TEST_ASSET_REGISTRY.
set -euo pipefail
# A failure inside $(...) stops the script too (bash leaves errexit off there by default).
shopt -s inherit_errexit

REGISTRY_VERSION=${REGISTRY_VERSION:-v3.1.2}
# shellcheck source=scripts/build-lib.sh
. "$(dirname "$0")/build-lib.sh"

build_registry() (
  dir=$CACHE/registry-$REGISTRY_VERSION
  out=$dir/registry
  [ -x "$out" ] && { echo "$out"; exit 0; }
  command -v go >/dev/null 2>&1 || die "the registry is not cached in $CACHE and Go is not installed.
Install Go 1.24 or newer (it builds the registry from the Go module proxy, once),
or set TEST_ASSET_REGISTRY to a distribution registry binary."
  lock "$dir"
  [ -x "$out" ] && { echo "$out"; exit 0; }
  log "building distribution registry $REGISTRY_VERSION from Go modules (first run only, ~2-10 min)"
  start_build "$dir"
  work=$WORK
  cat >"$work/main.go" <<'GO'
package main

import (
	_ "github.com/distribution/distribution/v3/registry/storage/driver/filesystem"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/inmemory"

	"github.com/distribution/distribution/v3/registry"
)

func main() { _ = registry.RootCmd.Execute() }
GO
  printf 'module wiw/registry\ngo 1.24\nrequire github.com/distribution/distribution/v3 %s\n' \
    "$REGISTRY_VERSION" >"$work/go.mod"
  (cd "$work" && go mod tidy >&2 && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w \
    -X github.com/distribution/distribution/v3/version.version=$REGISTRY_VERSION" -o registry . >&2)
  mv "$work/registry" "$out"
  echo "$out"
)

if [ -n "${TEST_ASSET_REGISTRY:-}" ]; then
  [ -x "$TEST_ASSET_REGISTRY" ] || die "TEST_ASSET_REGISTRY=$TEST_ASSET_REGISTRY is not an executable file"
  registry=$TEST_ASSET_REGISTRY
else
  registry=$(build_registry)
fi
printf 'REGISTRY=%q\n' "$registry"
