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
