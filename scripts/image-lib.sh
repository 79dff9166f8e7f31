# shellcheck shell=bash
# Shared by the image scripts: buildah on the project's own storage (under the cache folder,
# so nothing mixes with the machine's other images), logging, and a label reader.
CACHE=${WIW_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/workload-identity-webhook}
STORAGE=$CACHE/containers

log() { echo "$(basename "$0"): $*" >&2; }
die() { log "$*"; exit 1; }

[ "$(id -u)" = 0 ] || die "building images needs root (buildah with the overlay driver)"
command -v buildah >/dev/null || die "buildah is not installed (apt-get install buildah)"

bh() {
  buildah --root "$STORAGE/storage" --runroot "$STORAGE/run" --storage-driver overlay "$@"
}

# The value of a label of a stored image, or nothing if the image is absent.
image_label() {
  bh inspect --type image --format "{{index .OCIv1.Config.Labels \"$2\"}}" "$1" 2>/dev/null || true
}
