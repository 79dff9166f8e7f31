#!/usr/bin/env bash
# Provides the images the node suite and `demo --node` load into containerd, built without any
# registry: the base image (scripts/base-image.sh: the stand-in for the Dockerfile's pinned build
# stages, and the SDK probes' Pods), the pause image (scripts/pause-image.sh) and the webhook image
# built from the Dockerfile for this machine's platform by scripts/build-image.sh (as the release
# builds it) on that stand-in. Each image the node loads is exported once per image ID as a
# docker-archive in the cache; later runs reuse the archives.
#
# Prints shell assignments: WEBHOOK_IMAGE, BASE_IMAGE, PAUSE_IMAGE (names), *_ARCHIVE (files) and
# WEBHOOK_IMAGE_ID (the webhook image's ID, sha256:...).
set -euo pipefail
# A failure inside $(...) stops the script too (bash leaves errexit off there by default).
shopt -s inherit_errexit
cd "$(dirname "$0")/.."
. scripts/image-lib.sh

WEBHOOK_IMAGE=${WEBHOOK_IMAGE:-docker.io/library/workload-identity-webhook:dev}

# One build at a time (test files run in parallel and each asks for the images).
mkdir -p "$STORAGE"
exec 9>"$STORAGE/provide-images.lock"
flock 9

base=$(bash scripts/base-image.sh)
pause=$(bash scripts/pause-image.sh)
case "$(uname -m)" in
  x86_64) platform=linux/amd64 ;;
  aarch64) platform=linux/arm64 ;;
  *) die "no webhook image for $(uname -m)" ;;
esac
# NODE_IMAGE: the Dockerfile pins Docker Hub's node:24-bookworm-slim by digest; this machine has
# no registry, so the build stages run on the local stand-in of scripts/base-image.sh.
built=$(NODE_IMAGE=$base bash scripts/build-image.sh "$platform" "$WEBHOOK_IMAGE")
eval "$built"

# docker-archive: what `ctr images import` reads, with the name kept. Written beside its name and
# renamed last; a killed export's leftovers go (the lock above says no export is under way).
rm -f "$CACHE"/images/*.part
archive() {
  local id; id=$(bh inspect --type image --format '{{.FromImageID}}' "$1")
  local out=$CACHE/images/${id:0:20}.tar
  if [ ! -f "$out" ]; then
    mkdir -p "$CACHE/images"
    rm -f "$out.part"
    bh push --quiet "$1" "docker-archive:$out.part:$1" >&2
    mv "$out.part" "$out"
  fi
  echo "$out"
}
printf 'WEBHOOK_IMAGE=%q\nWEBHOOK_IMAGE_ARCHIVE=%q\n' "$WEBHOOK_IMAGE" "$(archive "$WEBHOOK_IMAGE")"
printf 'BASE_IMAGE=%q\nBASE_IMAGE_ARCHIVE=%q\n' "$base" "$(archive "$base")"
printf 'PAUSE_IMAGE=%q\nPAUSE_IMAGE_ARCHIVE=%q\n' "$pause" "$(archive "$pause")"
printf 'WEBHOOK_IMAGE_ID=%q\n' "$IMAGE_ID"
