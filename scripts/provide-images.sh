#!/usr/bin/env bash
# Provides the images the node suite and `demo --node` load into containerd, built without any
# registry: the base image (scripts/base-image.sh: the stand-in for the Dockerfile's pinned build
# stage, and the SDK probes' Pods), the runtime bases the Dockerfile pins (scripts/runtime-base.sh), the pause image
# (scripts/pause-image.sh) and the webhook image built from the Dockerfile with buildah for this
# machine's platform, never pulling. Each image the node loads is exported once per image ID as a
# docker-archive in the cache; later runs reuse the archives.
#
# Prints shell assignments: WEBHOOK_IMAGE, BASE_IMAGE, PAUSE_IMAGE (names) and *_ARCHIVE (files),
# RUNTIME_BASE_AMD64 and RUNTIME_BASE_ARM64 (name@digest).
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
runtime=$(bash scripts/runtime-base.sh)
eval "$runtime"
case "$(uname -m)" in
  x86_64) arch=amd64 runtime_base=$RUNTIME_BASE_AMD64 ;;
  aarch64) arch=arm64 runtime_base=$RUNTIME_BASE_ARM64 ;;
  *) die "no runtime base for $(uname -m)" ;;
esac

# The image's version label: package.json's (the CLI prints the same, the chart's appVersion too).
version=$(sed -n 's/^  "version": "\(.*\)",$/\1/p' package.json)
[ -n "$version" ] || die "no version in package.json"
build_args=(--build-arg "VERSION=$version")
if [ -n "${NODE_EXTRA_CA_CERTS:-}" ] && [ -f "$NODE_EXTRA_CA_CERTS" ]; then
  # The machine's extra CA for npm inside RUN steps: mounted for the build only.
  build_args+=(--volume "$NODE_EXTRA_CA_CERTS:/run/wiw-extra-ca.pem:ro" --build-arg NODE_EXTRA_CA_CERTS=/run/wiw-extra-ca.pem)
fi
start=$(date +%s)
# --layers: unchanged steps come from the cache; --pull=never: FROM resolves to the local bases.
# NODE_IMAGE: the Dockerfile pins Docker Hub's node:24-bookworm-slim by digest; this machine has
# no registry, so the build stage runs on the local stand-in of scripts/base-image.sh.
bh build --quiet --layers --pull-never --network host "${build_args[@]}" --build-arg "NODE_IMAGE=$base" \
  --platform "linux/$arch" --build-arg "BUILDPLATFORM=linux/$arch" --build-arg "RUNTIME_BASE=$runtime_base" \
  --tag "$WEBHOOK_IMAGE" --file Dockerfile . >"$STORAGE/webhook-build.log" 2>&1 ||
  die "building $WEBHOOK_IMAGE failed: $(tail -30 "$STORAGE/webhook-build.log")"
log "built $WEBHOOK_IMAGE in $(( $(date +%s) - start )) s"

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
echo "$runtime"
