#!/usr/bin/env bash
# Builds the webhook image for one platform from the Dockerfile alone, with buildah, in the
# project's storage: the one way the release (scripts/release.ts), the tests' image
# (scripts/provide-images.sh) and the reproducibility test (test/e2e/image.test.ts, from a clean
# checkout into an empty storage) build it, so the image the tests run is the image the release
# pushes. Reproducible: --timestamp 0 fixes the image's dates and every file's mtime, and the
# Dockerfile pins and checks every input, so the same sources give the same image ID.
#
# Usage: scripts/build-image.sh PLATFORM NAME     (linux/amd64 | linux/arm64; prints IMAGE_ID=sha256:...)
# NODE_IMAGE: the build stages' image; unset, the Dockerfile's pin (node:24-bookworm-slim by digest
# from Docker Hub, pulled if missing). A machine without Docker Hub passes a local stand-in:
# NODE_IMAGE=$(bash scripts/base-image.sh), as provide-images.sh and the tests do.
# Needs root and buildah; reaches the npm registry and deb.debian.org (the lock's inputs).
set -euo pipefail
# A failure inside $(...) stops the script too (bash leaves errexit off there by default).
shopt -s inherit_errexit
cd "$(dirname "$0")/.."
. scripts/image-lib.sh

[ $# = 2 ] || die "usage: scripts/build-image.sh linux/amd64|linux/arm64 NAME"
platform=$1 name=$2
case "$platform" in
  # The variant, as the OCI index names arm64 images (buildah would leave it empty).
  linux/amd64) ;;
  linux/arm64) platform=linux/arm64/v8 ;;
  *) die "PLATFORM $platform: linux/amd64 or linux/arm64" ;;
esac
case "$(uname -m)" in
  x86_64) build_platform=linux/amd64 ;;
  aarch64) build_platform=linux/arm64 ;;
  *) die "no build platform for $(uname -m)" ;;
esac

# The image's version label: package.json's (the CLI prints the same, the chart's appVersion too).
version=$(sed -n 's/^  "version": "\(.*\)",$/\1/p' package.json)
[ -n "$version" ] || die "no version in package.json"
# buildah 1.28 sets TARGETPLATFORM and TARGETARCH from --platform but not BUILDPLATFORM.
args=(--platform "$platform" --build-arg "BUILDPLATFORM=$build_platform" --build-arg "VERSION=$version")
if [ -n "${NODE_IMAGE:-}" ]; then
  # A local stand-in: never pull it.
  args+=(--build-arg "NODE_IMAGE=$NODE_IMAGE" --pull-never)
fi
if [ -n "${NODE_EXTRA_CA_CERTS:-}" ] && [ -f "$NODE_EXTRA_CA_CERTS" ]; then
  # The machine's extra CA for the downloads inside RUN steps: mounted for the build only.
  args+=(--volume "$NODE_EXTRA_CA_CERTS:/run/wiw-extra-ca.pem:ro" --build-arg NODE_EXTRA_CA_CERTS=/run/wiw-extra-ca.pem)
fi
mkdir -p "$STORAGE"
buildlog=$(mktemp "${TMPDIR:-/tmp}/wiw-build-XXXXXX")
trap 'rm -f "$buildlog"' EXIT
start=$(date +%s)
# --layers: the root filesystem and the bundle as two layers (the first is the same for every
# release with the same lock), unchanged steps from the cache; --timestamp 0: the image's dates
# and its files' mtimes are 1970-01-01, whenever it is built.
bh build --quiet --layers --timestamp 0 --network host "${args[@]}" --tag "$name" --file Dockerfile . >"$buildlog" 2>&1 ||
  die "building $name for $platform failed: $(tail -30 "$buildlog")"
log "built $name ($platform) in $(($(date +%s) - start)) s"
printf 'IMAGE_ID=%s\n' "sha256:$(bh inspect --type image --format '{{.FromImageID}}' "$name")"
