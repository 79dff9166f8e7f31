#!/usr/bin/env bash
# Provides kube-apiserver, etcd, helm and kubectl for the tests and the demo.
# Release downloads are not an option here, so they are built from Go modules once and
# cached per version; later runs only print the cached paths.
#
# Prints shell assignments: KUBE_APISERVER=... ETCD=... HELM=... KUBECTL=... (kubectl is built with
# kube-apiserver, at its version: the demo suggests it); with --node also KUBELET,
# KUBE_CONTROLLER_MANAGER and KUBE_SCHEDULER (built together, at the API server's version); with
# --newest also KUBE_APISERVER_NEWEST, kube-apiserver at K8S_NEWEST_VERSION (the newest the suite
# runs against: MutatingAdmissionPolicy at admissionregistration.k8s.io/v1, the policy mode's tests);
# with --oldest also KUBE_APISERVER_OLDEST, kube-apiserver at K8S_OLDEST_VERSION (the chart's
# kubeVersion floor, at its last patch release: test/README.md "Kubernetes versions").
# Reuses binaries the user already has (envtest conventions):
#   KUBEBUILDER_ASSETS (a folder holding kube-apiserver and etcd, and maybe helm and kubectl),
#   TEST_ASSET_KUBE_APISERVER, TEST_ASSET_ETCD, TEST_ASSET_HELM, TEST_ASSET_KUBECTL,
#   TEST_ASSET_KUBE_APISERVER_NEWEST, TEST_ASSET_KUBE_APISERVER_OLDEST.
set -euo pipefail
# A failure inside $(...) stops the script too (bash leaves errexit off there by default).
shopt -s inherit_errexit

K8S_VERSION=${K8S_VERSION:-v1.34.4}
K8S_NEWEST_VERSION=${K8S_NEWEST_VERSION:-v1.36.3}
K8S_OLDEST_VERSION=${K8S_OLDEST_VERSION:-v1.30.14}
ETCD_VERSION=${ETCD_VERSION:-v3.6.16}
HELM_VERSION=${HELM_VERSION:-v3.17.4}
# shellcheck source=scripts/build-lib.sh
. "$(dirname "$0")/build-lib.sh"
KUBE_DIR=$CACHE/kubernetes-$K8S_VERSION

need_go() {
  command -v go >/dev/null 2>&1 && return 0
  die "kube-apiserver, kubectl, etcd and helm are not cached in $CACHE and Go is not installed.
Install Go 1.24 or newer (it builds them from the Go module proxy, once),
or point KUBEBUILDER_ASSETS at a folder holding kube-apiserver and etcd
(or set TEST_ASSET_KUBE_APISERVER, TEST_ASSET_ETCD and TEST_ASSET_HELM)."
}

# The go.mod of a build against k8s.io/kubernetes: the staging repositories it replaces with
# their v0.X.Y twins, as the Kubernetes repository itself does. The list follows the release:
# legacy-cloud-providers until 1.30, cri-client from 1.31, externaljwt from 1.32.
kube_go_mod() {
  local staging=v0.${K8S_VERSION#v1.} minor=${K8S_VERSION#v1.} extra=()
  minor=${minor%%.*}
  if [ "$minor" -lt 31 ]; then extra+=(legacy-cloud-providers); else extra+=(cri-client); fi
  [ "$minor" -lt 32 ] || extra+=(externaljwt)
  echo "module wiw/$1"
  echo "go 1.24"
  echo "require k8s.io/kubernetes $K8S_VERSION"
  for m in api apiextensions-apiserver apimachinery apiserver cli-runtime client-go \
    cloud-provider cluster-bootstrap code-generator component-base component-helpers \
    controller-manager cri-api csi-translation-lib dynamic-resource-allocation \
    endpointslice kms kube-aggregator kube-controller-manager kube-proxy \
    kube-scheduler kubectl kubelet metrics mount-utils pod-security-admission sample-apiserver \
    "${extra[@]}"; do
    echo "replace k8s.io/$m => k8s.io/$m $staging"
  done
}

# The main package of each server command, as in k8s.io/kubernetes/cmd/<name>. kubectl is
# k8s.io/kubernetes/cmd/kubectl itself, kept in go.mod by an import in tools.go (kube_package).
kube_main() {
  local name=$1 app=k8s.io/kubernetes/cmd/$1/app call
  case "$name" in
    kube-apiserver) call='app.NewAPIServerCommand()' ;;
    kubelet) call='app.NewKubeletCommand(context.Background())' ;;
    kube-controller-manager) call='app.NewControllerManagerCommand()' ;;
    kube-scheduler) call='app.NewSchedulerCommand()' ;;
    kube-proxy) call='app.NewProxyCommand()' ;;
    *) die "unknown Kubernetes command $name" ;;
  esac
  cat <<GO
package main

import (
	"context"
	"os"

	_ "time/tzdata"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"$app"
)

var _ = context.Background

func main() {
	os.Exit(cli.Run($call))
}
GO
}

# What `go build` is given for a command: kubectl's own package, or the main written for it.
kube_package() {
  if [ "$1" = kubectl ]; then echo k8s.io/kubernetes/cmd/kubectl; else echo "./cmd/$1"; fi
}

# Builds Kubernetes commands at K8S_VERSION into one temporary module (they share most
# packages, so one build of several costs little more than one), then moves each binary into
# place last, so an interrupted build never leaves a half-written binary that later runs trust.
# Each build runs in a subshell (the ( ) body): its EXIT trap removes its own temporary folder and
# nothing of it outlives the build (a RETURN trap would fire again in the caller, under set -u).
build_kube() (
  dir=$KUBE_DIR
  missing=()
  for name in "$@"; do [ -x "$dir/$name" ] || missing+=("$name"); done
  if [ ${#missing[@]} -gt 0 ]; then
    need_go
    lock "$dir"
    missing=()
    for name in "$@"; do [ -x "$dir/$name" ] || missing+=("$name"); done
  fi
  if [ ${#missing[@]} -gt 0 ]; then
    log "building ${missing[*]} $K8S_VERSION from Go modules (first run only, ~5-20 min)"
    minor=${K8S_VERSION#v1.}; minor=${minor%%.*}
    start_build "$dir"
    work=$WORK
    kube_go_mod build >"$work/go.mod"
    packages=()
    for name in "${missing[@]}"; do
      packages+=("$(kube_package "$name")")
      if [ "$name" = kubectl ]; then
        printf '//go:build tools\n\npackage tools\n\nimport _ "k8s.io/kubernetes/cmd/kubectl"\n' >"$work/tools.go"
      else
        mkdir -p "$work/cmd/$name"
        kube_main "$name" >"$work/cmd/$name/main.go"
      fi
    done
    # The version as Kubernetes stamps it (hack/lib/version.sh): component-base's and client-go's.
    stamp=()
    for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
      stamp+=("-X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor")
    done
    # Before 1.31 the in-tree cloud providers (k8s.io/legacy-cloud-providers) are linked unless
    # the build tag providerless leaves them out, as envtest's builds do; the proxy serves no
    # source for some of their versions (v0.29.6), so tidy is told to go on without it (-e).
    tidy=() tags=()
    [ "$minor" -ge 31 ] || { tidy=(-e); tags=(-tags providerless); }
    (cd "$work" && go mod tidy "${tidy[@]}" >&2 && mkdir bin &&
      CGO_ENABLED=0 go build -trimpath "${tags[@]}" -o bin/ -ldflags "-s -w ${stamp[*]}" "${packages[@]}" >&2)
    for name in "${missing[@]}"; do mv "$work/bin/$name" "$dir/$name"; done
  fi
  for name in "$@"; do echo "$dir/$name"; done
)

build_etcd() (
  out=$CACHE/etcd-$ETCD_VERSION/etcd
  [ -x "$out" ] && { echo "$out"; exit 0; }
  need_go
  lock "$(dirname "$out")"
  [ -x "$out" ] && { echo "$out"; exit 0; }
  log "building etcd $ETCD_VERSION from Go modules (first run only)"
  start_build "$(dirname "$out")"
  work=$WORK
  cat >"$work/main.go" <<'GO'
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
  printf 'module wiw/etcd\ngo 1.24\nrequire go.etcd.io/etcd/server/v3 %s\n' "$ETCD_VERSION" >"$work/go.mod"
  (cd "$work" && go mod tidy >&2 && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o etcd . >&2)
  mv "$work/etcd" "$out"
  echo "$out"
)

build_helm() (
  out=$CACHE/helm-$HELM_VERSION/helm
  [ -x "$out" ] && { echo "$out"; exit 0; }
  need_go
  lock "$(dirname "$out")"
  [ -x "$out" ] && { echo "$out"; exit 0; }
  log "building helm $HELM_VERSION from Go modules (first run only)"
  start_build "$(dirname "$out")"
  work=$WORK
  (cd "$work" && GOBIN="$work" CGO_ENABLED=0 go install -trimpath -ldflags "-s -w \
    -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION" "helm.sh/helm/v3/cmd/helm@$HELM_VERSION" >&2)
  mv "$work/helm" "$out"
  echo "$out"
)

if [ -n "${KUBEBUILDER_ASSETS:-}" ]; then
  : "${TEST_ASSET_KUBE_APISERVER:=$KUBEBUILDER_ASSETS/kube-apiserver}"
  : "${TEST_ASSET_ETCD:=$KUBEBUILDER_ASSETS/etcd}"
  [ -x "$KUBEBUILDER_ASSETS/helm" ] && : "${TEST_ASSET_HELM:=$KUBEBUILDER_ASSETS/helm}"
  [ -x "$KUBEBUILDER_ASSETS/kubectl" ] && : "${TEST_ASSET_KUBECTL:=$KUBEBUILDER_ASSETS/kubectl}"
fi
for v in TEST_ASSET_KUBE_APISERVER TEST_ASSET_ETCD TEST_ASSET_HELM TEST_ASSET_KUBECTL TEST_ASSET_KUBE_APISERVER_NEWEST \
  TEST_ASSET_KUBE_APISERVER_OLDEST; do
  p=${!v:-}
  [ -z "$p" ] || [ -x "$p" ] || die "$v=$p is not an executable file"
done

# kube-apiserver and kubectl in one build: those not given are built together.
kube=()
[ -n "${TEST_ASSET_KUBE_APISERVER:-}" ] || kube+=(kube-apiserver)
[ -n "${TEST_ASSET_KUBECTL:-}" ] || kube+=(kubectl)
[ ${#kube[@]} -eq 0 ] || build_kube "${kube[@]}" >/dev/null
kas=${TEST_ASSET_KUBE_APISERVER:-$KUBE_DIR/kube-apiserver}
kubectl=${TEST_ASSET_KUBECTL:-$KUBE_DIR/kubectl}
etcd=${TEST_ASSET_ETCD:-$(build_etcd)}
helm=${TEST_ASSET_HELM:-$(build_helm)}
printf 'KUBE_APISERVER=%q\nETCD=%q\nHELM=%q\nKUBECTL=%q\n' "$kas" "$etcd" "$helm" "$kubectl"

node=false newest=false oldest=false
for arg in "$@"; do
  case "$arg" in
    --node) node=true ;;
    --newest) newest=true ;;
    --oldest) oldest=true ;;
    *) die "unknown option $arg (expected --node, --newest or --oldest)" ;;
  esac
done

# --node: also the node's and the controllers' commands (test/e2e/node-*.test.ts, demo --node).
if $node; then
  # A command substitution, not a process substitution: a failed build must stop the script.
  node_out=$(build_kube kubelet kube-controller-manager kube-scheduler)
  mapfile -t node_bins <<<"$node_out"
  printf 'KUBELET=%q\nKUBE_CONTROLLER_MANAGER=%q\nKUBE_SCHEDULER=%q\n' "${node_bins[@]}"
fi

# --newest: kube-apiserver alone at the newest version, in a folder of its own version.
if $newest; then
  newest_kas=${TEST_ASSET_KUBE_APISERVER_NEWEST:-$(K8S_VERSION=$K8S_NEWEST_VERSION KUBE_DIR=$CACHE/kubernetes-$K8S_NEWEST_VERSION build_kube kube-apiserver)}
  printf 'KUBE_APISERVER_NEWEST=%q\n' "$newest_kas"
fi

# --oldest: kube-apiserver alone at the oldest version, in a folder of its own version.
if $oldest; then
  oldest_kas=${TEST_ASSET_KUBE_APISERVER_OLDEST:-$(K8S_VERSION=$K8S_OLDEST_VERSION KUBE_DIR=$CACHE/kubernetes-$K8S_OLDEST_VERSION build_kube kube-apiserver)}
  printf 'KUBE_APISERVER_OLDEST=%q\n' "$oldest_kas"
fi
