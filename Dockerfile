# syntax=docker/dockerfile:1
# The webhook image, for linux/amd64 and linux/arm64. `npm run release -- --registry HOST/PATH`
# builds and pushes both (docs/install.md); scripts/provide-images.sh builds the machine's own for
# the tests. The server is bundled (scripts/bundle.ts): no node_modules, no package manager, no
# shell; it runs as a numeric non-root user and writes nothing to its filesystem (read-only root).
#
# The base of the shipped stage is built locally by scripts/runtime-base.sh, distroless-style:
# Node.js 24, the C libraries it links, CA certificates, /etc/passwd. It is pinned here by
# digest, and the pin is checked: every input of the base is pinned by version and hash in
# scripts/runtime-base.lock, the base is assembled reproducibly (one layer, sorted, mtimes 0),
# so its digest is a function of the lock and the recipe; the script rebuilds it where it is
# missing and refuses a result whose digest differs from these lines. `--update` resolves newer
# Node.js and Debian packages and rewrites the lock and these lines; review and commit both.
# Elsewhere, run scripts/runtime-base.sh first (it needs root and buildah), or push the bases
# to a registry and pass its references as RUNTIME_BASE_AMD64/ARM64 build arguments.
# The build stage's image (NODE_IMAGE) ships nothing, but it runs npm, esbuild and the bundler
# that make what ships, so it is pinned too: the multi-arch index of the official
# node:24-bookworm-slim (Node.js 24.19.0) by digest, as docker-library/repo-info recorded it
# (repos/node/remote/24-bookworm-slim.md). Any builder pulls it from Docker Hub; the tests,
# which have no registry, pass their local stand-in (scripts/base-image.sh) as NODE_IMAGE, and so
# does `npm run release`. To refresh: `docker buildx imagetools inspect node:24-bookworm-slim`,
# then this line. What the stage makes, the bundle, follows from package-lock.json (npm ci checks
# every package's integrity, esbuild included) and src/.
ARG NODE_IMAGE=node:24-bookworm-slim@sha256:a9f5f7c91a432850b2a8a7797adf5eadb6c733ceed61167806cee7ea7fbc29df
ARG RUNTIME_BASE_AMD64=localhost/workload-identity-webhook-runtime@sha256:39363725df48c2af4000c9bd4c1b1c9d212ad1f32d9a1c3f4ac8309c53fc8384
ARG RUNTIME_BASE_ARM64=localhost/workload-identity-webhook-runtime@sha256:6c262dbd867386532ac8fda5f53b3b6e8a7b6161f71dd58150ca7684986d1d35
# The base of the image being built: the build scripts pass the pin of the target platform
# (buildah 1.28 cannot pick a stage by ${TARGETARCH}); without one, amd64's.
ARG RUNTIME_BASE=${RUNTIME_BASE_AMD64}
# Set by BuildKit; buildah 1.28 sets TARGETPLATFORM from --platform, and the build scripts pass
# BUILDPLATFORM.
ARG BUILDPLATFORM
ARG TARGETPLATFORM

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
# What ships, as one layer: the bundle and package.json (the version a reader of /app sees).
RUN node scripts/bundle.ts /src/app/dist && cp package.json /src/app/

# The shipped stage: the runtime base of the target platform and the bundle, nothing run.
FROM --platform=${TARGETPLATFORM} ${RUNTIME_BASE}
# package.json's version, set by the release (scripts/release.ts) and scripts/provide-images.sh.
ARG VERSION=dev
LABEL org.opencontainers.image.title="workload-identity-webhook" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.licenses="Apache-2.0"
# NODE_OPTIONS: the V8 flags of the container, in this one place (the chart's nodeOptions
# replaces them). The heap is sized from the container's memory limit: without a flag Node 24
# lets it grow to the whole limit, and the kernel kills the container before the GC runs hard.
ENV NODE_ENV=production \
    NODE_OPTIONS="--max-old-space-size-percentage=50 --max-semi-space-size=4"
WORKDIR /app
COPY --from=build /src/app ./
# Numeric, so the kubelet can verify runAsNonRoot; the chart runs it as the same user.
USER 65532:65532
EXPOSE 8443 9090
ENTRYPOINT ["/usr/local/bin/node", "/app/dist/cli.js"]
CMD ["serve"]
