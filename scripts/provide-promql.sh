#!/usr/bin/env bash
# Provides wiw-promql (scripts/promql/main.go): Prometheus's rule-file validator, PromQL parser,
# scrape parser and query engine, which the tests use to judge the chart's alerts and dashboard.
# Built from Go modules once and cached per Prometheus version and source digest, as
# scripts/provide-binaries.sh does for kube-apiserver; later runs only print the cached path.
#
# Prints one shell assignment: PROMQL=...
# Reuses a binary you already have: TEST_ASSET_PROMQL.
set -euo pipefail
# The build runs inside $(...), where bash drops errexit unless told to keep it: without this, a
# failed build would go on to print the path of a binary that was never made.
shopt -s inherit_errexit

# github.com/prometheus/prometheus v0.316.0 is Prometheus 3.16.0 (the Go module's numbering).
PROMETHEUS_VERSION=${PROMETHEUS_VERSION:-v0.316.0}
# shellcheck source=scripts/build-lib.sh
. "$(dirname "$0")/build-lib.sh"
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/promql" && pwd)/main.go

if [ -n "${TEST_ASSET_PROMQL:-}" ]; then
  [ -x "$TEST_ASSET_PROMQL" ] || die "TEST_ASSET_PROMQL=$TEST_ASSET_PROMQL is not an executable file"
  printf 'PROMQL=%q\n' "$TEST_ASSET_PROMQL"
  exit 0
fi

# Keyed by the source too: an edit of main.go builds a new binary instead of reusing a stale one.
digest=$(sha256sum "$SRC" | cut -c1-12)

build_promql() (
  dir=$CACHE/promql-$PROMETHEUS_VERSION-$digest
  out=$dir/wiw-promql
  [ -x "$out" ] && { echo "$out"; exit 0; }
  command -v go >/dev/null 2>&1 || die "wiw-promql is not cached in $dir and Go is not installed.
Install Go 1.26 or newer (it builds it from the Go module proxy, once), or set TEST_ASSET_PROMQL."
  lock "$dir"
  [ -x "$out" ] && { echo "$out"; exit 0; }
  log "building wiw-promql against github.com/prometheus/prometheus $PROMETHEUS_VERSION (first run only, a few minutes)"
  start_build "$dir"
  work=$WORK
  cp "$SRC" "$work/main.go"
  printf 'module wiw/promql\ngo 1.26\nrequire github.com/prometheus/prometheus %s\n' "$PROMETHEUS_VERSION" >"$work/go.mod"
  (cd "$work" && go mod tidy >&2 && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o wiw-promql . >&2) ||
    die "building wiw-promql failed (see above)"
  # Moved into place last: an interrupted build never leaves a binary that later runs trust.
  mv "$work/wiw-promql" "$out"
  echo "$out"
)

promql=$(build_promql)
printf 'PROMQL=%q\n' "$promql"
