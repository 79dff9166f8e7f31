#!/usr/bin/env bash
# Builds bench/patch-cost/main.go once against gopkg.in/evanphx/json-patch.v4 at the version that
# k8s.io/apiserver pins for the newest kube-apiserver the suite runs (scripts/provide-binaries.sh's
# K8S_NEWEST_VERSION: k8s.io/apiserver v0.X.Y for v1.X.Y), and prints the binary's path. Cached
# under $CACHE/patch-cost-<json-patch version>-<hash of main.go>/, locked like the other provide
# scripts (scripts/build-lib.sh); from an empty cache it reads the pin and the module from the Go
# module proxy.
set -euo pipefail
shopt -s inherit_errexit
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=scripts/build-lib.sh
. "$here/../../scripts/build-lib.sh"

command -v go >/dev/null 2>&1 || die "Go is not installed: the patch phase builds bench/patch-cost/main.go (Go 1.26 or newer)"
# shellcheck disable=SC2016 # the pattern matches a literal ${...}
k8s=${K8S_NEWEST_VERSION:-$(sed -n 's/^K8S_NEWEST_VERSION=\${K8S_NEWEST_VERSION:-\(v[0-9.]*\)}$/\1/p' "$here/../../scripts/provide-binaries.sh")}
[ -n "$k8s" ] || die "no K8S_NEWEST_VERSION in scripts/provide-binaries.sh"
apiserver=v0.${k8s#v1.}
# The pin: k8s.io/apiserver's go.mod, from the module cache or the proxy (its .mod file alone).
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
gomod=$(cd "$tmp" && GOFLAGS=-mod=mod go list -m -f '{{.GoMod}}' "k8s.io/apiserver@$apiserver")
version=$(awk '$1 == "gopkg.in/evanphx/json-patch.v4" { print $2; exit }' "$gomod")
[ -n "$version" ] || die "k8s.io/apiserver $apiserver's go.mod ($gomod) requires no gopkg.in/evanphx/json-patch.v4"
dir=$CACHE/patch-cost-$version-$(sha256sum "$here/main.go" | cut -c1-12)
out=$dir/patch-cost
build() (
  [ -x "$out" ] && exit 0
  lock "$dir"
  [ -x "$out" ] && exit 0
  log "building patch-cost against gopkg.in/evanphx/json-patch.v4 $version (k8s.io/apiserver $apiserver's pin)"
  start_build "$dir"
  cp "$here/main.go" "$WORK/"
  printf 'module wiw/patch-cost\ngo 1.26\nrequire gopkg.in/evanphx/json-patch.v4 %s\n' "$version" >"$WORK/go.mod"
  (cd "$WORK" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -o patch-cost . >&2)
  mv "$WORK/patch-cost" "$out"
)
build
printf 'PATCH_COST=%q\nJSON_PATCH_VERSION=%q\nAPISERVER_MODULE_VERSION=%q\n' "$out" "$version" "$apiserver"
