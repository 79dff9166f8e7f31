#!/usr/bin/env bash
# Installs, from Debian's packages, what the node suite and `demo --node` run: containerd, runc,
# the CNI plugins (bridge, host-local, loopback), iptables, and what builds the images without a
# registry (buildah, debootstrap, gcc with a static libc for the pause image; binutils' readelf,
# which test/e2e/image.test.ts reads the image's ELF files with). Only what is missing; needs root
# (apt-get).
set -euo pipefail
# A failure inside $(...) stops the script too (bash leaves errexit off there by default).
shopt -s inherit_errexit

packages=(containerd runc containernetworking-plugins iptables buildah debootstrap gcc libc6-dev binutils)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ]; then
  echo "node-packages.sh: missing Debian packages: ${missing[*]}; install them as root (apt-get install ${missing[*]})" >&2
  exit 1
fi
echo "node-packages.sh: installing ${missing[*]}" >&2
apt-get update -qq >&2
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
