# syntax=docker/dockerfile:1
# The webhook image: `docker build -t REGISTRY/workload-identity-webhook:TAG .`
# Node.js 24 (the current LTS; package.json engines asks for 24), production dependencies only,
# runs as a numeric non-root user, writes nothing to its filesystem (read-only root works).
# scripts/provide-images.sh builds it with buildah, without a registry (test/image.test.ts).
ARG NODE_IMAGE=node:24-bookworm-slim

# Compile TypeScript to dist/ (needs the dev dependencies; none of this stage ships).
FROM ${NODE_IMAGE} AS build
# A CA bundle for npm behind a TLS-intercepting proxy (a build argument: the image keeps nothing).
ARG NODE_EXTRA_CA_CERTS
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
RUN npm run build

# Production dependencies only, exactly as locked; no install scripts run. (The npm cache stays
# behind in this stage: only node_modules is copied on.)
FROM ${NODE_IMAGE} AS deps
ARG NODE_EXTRA_CA_CERTS
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund

FROM ${NODE_IMAGE}
# The version: package.json's, passed by scripts/provide-images.sh (docker build --build-arg
# VERSION=...); the CLI's --version and the chart's appVersion are the same.
ARG VERSION=unknown
LABEL org.opencontainers.image.version=${VERSION}
ENV NODE_ENV=production
WORKDIR /app
COPY --from=deps /app/node_modules ./node_modules
COPY --from=build /src/dist ./dist
COPY package.json ./
# Numeric, so the kubelet can verify runAsNonRoot; the chart runs it as the same user.
USER 65532:65532
EXPOSE 8443 9090
ENTRYPOINT ["node", "/app/dist/cli.js"]
CMD ["serve"]
