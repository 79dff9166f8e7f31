# shellcheck shell=bash
# Shared by the scripts that build a program once and cache it (provide-binaries, provide-peers,
# provide-promql, provide-registry). A build runs in a subshell, `name() ( ... )`, that calls
# `lock DIR` and then `start_build DIR`: the lock is held until the subshell exits (whoever waited
# finds the binary and builds nothing), and the build's folder is inside the locked cache folder,
# so the final mv is a rename, never a copy across file systems that a kill could leave half done
# under the binary's name. The subshell's EXIT trap removes the build's folder.

# shellcheck disable=SC2034 # used by the scripts that source this one
CACHE=${WIW_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/workload-identity-webhook}

log() { echo "$(basename "$0" .sh): $*" >&2; }
die() { log "$*"; exit 1; }

# One build of a folder at a time: test files, checkouts and benchmarks may ask at once.
lock() {
  mkdir -p "$1"
  exec 9>"$1/.lock"
  flock 9
}

# Sets WORK to a fresh folder inside DIR (locked) and removes it when the subshell exits. A killed
# build's leftovers go first: the lock says nobody else is building.
start_build() {
  rm -rf "$1"/.build-*
  WORK=$(mktemp -d "$1/.build-XXXXXX")
  trap 'rm -rf "$WORK"' EXIT
}

# Builds a Go command with `go install PKG@VERSION` into $CACHE/NAME-VERSION/NAME once (locked,
# renamed into place last) and prints its path. For modules whose own go.mod builds them as they
# are released (no replace directives): cosign, actionlint.
go_install_cached() (
  local name=$1 version=$2 pkg=$3 dir out
  dir=$CACHE/$name-$version
  out=$dir/$name
  [ -x "$out" ] && { echo "$out"; exit 0; }
  command -v go >/dev/null 2>&1 || die "$name is not cached in $dir and Go is not installed.
Install Go 1.26 or newer (it builds $name from the Go module proxy, once), or set TEST_ASSET_${name^^}."
  lock "$dir"
  [ -x "$out" ] && { echo "$out"; exit 0; }
  log "building $name $version from Go modules (first run only)"
  start_build "$dir"
  (cd "$WORK" && GOBIN="$WORK" CGO_ENABLED=0 go install -trimpath -ldflags "-s -w" "$pkg@$version" >&2) ||
    die "building $name failed (see above)"
  mv "$WORK/$name" "$out"
  echo "$out"
)
