#!/usr/bin/env bash
# Provides the three single-cloud webhooks this one replaces, at pinned versions, for the
# differential harness (scripts/peer-diff.ts, test/e2e/peer-diff.test.ts) and the side-by-side benchmark.
#
#   bash scripts/provide-peers.sh [aws] [azure] [pfnet]     (none named: all three)
#   bash scripts/provide-peers.sh --versions                 (the pins only; builds nothing)
#
# Prints shell assignments, one per peer asked for: AWS_PEER=... AZURE_PEER=... PFNET_PEER=...
# (paths to the peers' webhook binaries) and their versions (AWS_PEER_VERSION=... and so on).
#
# - aws/amazon-eks-pod-identity-webhook is a Go module the Go module proxy serves: built from it
#   once, cached under $CACHE/peer-aws-<version>/ like kube-apiserver.
# - Azure/azure-workload-identity and pfnet-research/gcp-workload-identity-federation-webhook are
#   not served by the proxy (nor is Azure's dependency monis.app/mlog), and this repository does not
#   build other projects' source: bring the binary (AZURE_PEER=/path, PFNET_PEER=/path) or place it
#   at $CACHE/peer-azure-<version>/webhook and $CACHE/peer-pfnet-<version>/webhook. Without it the
#   script stops at once, naming what is missing.
set -euo pipefail
shopt -s inherit_errexit # a failed step inside $(build_aws) stops it, not only the last command

AWS_PEER_VERSION=${AWS_PEER_VERSION:-v0.6.17}
AZURE_PEER_VERSION=${AZURE_PEER_VERSION:-v1.6.0}
PFNET_PEER_VERSION=${PFNET_PEER_VERSION:-v0.7.0}
AWS_MODULE=github.com/aws/amazon-eks-pod-identity-webhook

# shellcheck source=scripts/build-lib.sh
. "$(dirname "$0")/build-lib.sh"

# The AWS peer from the Go module proxy, built in its locked cache folder and moved into place last
# (scripts/build-lib.sh), so an interrupted build never leaves a half-written binary.
build_aws() (
  out=$CACHE/peer-aws-$AWS_PEER_VERSION/amazon-eks-pod-identity-webhook
  [ -x "$out" ] && { echo "$out"; exit 0; }
  command -v go >/dev/null 2>&1 || die "the AWS peer ($AWS_MODULE $AWS_PEER_VERSION) is not cached in $CACHE and Go is not installed.
Install Go 1.26 or newer (it builds the peer from the Go module proxy, once), or set AWS_PEER to its binary."
  lock "$(dirname "$out")"
  [ -x "$out" ] && { echo "$out"; exit 0; }
  log "building $AWS_MODULE $AWS_PEER_VERSION from the Go module proxy (first run only, ~3 min)"
  start_build "$(dirname "$out")"
  work=$WORK
  # A module that requires the peer at its tag: its build list is the peer's own go.mod (it has no
  # replace directives), and nothing asks the proxy for the list of versions, which it refuses.
  printf 'module wiw/peer-aws\ngo 1.26\nrequire %s %s\n' "$AWS_MODULE" "$AWS_PEER_VERSION" >"$work/go.mod"
  (cd "$work" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags "-s -w" -o bin/ "$AWS_MODULE" >&2)
  [ -x "$work/bin/amazon-eks-pod-identity-webhook" ] || die "the build of $AWS_MODULE@$AWS_PEER_VERSION wrote no binary"
  mv "$work/bin/amazon-eks-pod-identity-webhook" "$out"
  echo "$out"
)

# A peer this script cannot build: the binary named by its variable, or the one in its cache folder.
brought() {
  local var=$1 repo=$2 version=$3 dir=$4 given=${!1:-}
  if [ -n "$given" ]; then
    [ -x "$given" ] || die "$var=$given is not an executable file"
    echo "$given"
    return
  fi
  [ -x "$CACHE/$dir/webhook" ] && { echo "$CACHE/$dir/webhook"; return; }
  die "$repo $version is missing: no $var and no $CACHE/$dir/webhook.
The Go module proxy does not serve that module, so this script cannot build it. Build the peer's
webhook from its $version tag as its release does, then set $var=/path/to/it or copy it to
$CACHE/$dir/webhook."
}

if [ "${1:-}" = "--versions" ]; then
  printf 'AWS_PEER_VERSION=%q\nAZURE_PEER_VERSION=%q\nPFNET_PEER_VERSION=%q\n' \
    "$AWS_PEER_VERSION" "$AZURE_PEER_VERSION" "$PFNET_PEER_VERSION"
  exit 0
fi

peers=("$@")
[ ${#peers[@]} -gt 0 ] || peers=(aws azure pfnet)
for peer in "${peers[@]}"; do
  case "$peer" in
    aws)
      if [ -n "${AWS_PEER:-}" ]; then
        [ -x "$AWS_PEER" ] || die "AWS_PEER=$AWS_PEER is not an executable file"
        path=$AWS_PEER
      else
        path=$(build_aws)
      fi
      printf 'AWS_PEER=%q\nAWS_PEER_VERSION=%q\n' "$path" "$AWS_PEER_VERSION"
      ;;
    azure)
      path=$(brought AZURE_PEER Azure/azure-workload-identity "$AZURE_PEER_VERSION" "peer-azure-$AZURE_PEER_VERSION")
      printf 'AZURE_PEER=%q\nAZURE_PEER_VERSION=%q\n' "$path" "$AZURE_PEER_VERSION"
      ;;
    pfnet)
      path=$(brought PFNET_PEER pfnet-research/gcp-workload-identity-federation-webhook "$PFNET_PEER_VERSION" \
        "peer-pfnet-$PFNET_PEER_VERSION")
      printf 'PFNET_PEER=%q\nPFNET_PEER_VERSION=%q\n' "$path" "$PFNET_PEER_VERSION"
      ;;
    *) die "unknown peer \"$peer\"; expected aws, azure or pfnet" ;;
  esac
done
