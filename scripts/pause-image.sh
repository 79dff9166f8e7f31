#!/usr/bin/env bash
# Produces, without any registry, the Pod sandbox ("pause") image containerd is configured
# with: one static binary that holds the Pod's namespaces, reaps orphans and exits on
# SIGINT/SIGTERM, as the upstream pause does. Later runs reuse the stored image.
# Needs root, buildah and gcc with a static libc (libc6-dev).
#
# Usage: scripts/pause-image.sh   (prints the image name)
set -euo pipefail
# A failure inside $(...) stops the script too (bash leaves errexit off there by default).
shopt -s inherit_errexit
cd "$(dirname "$0")/.."
. scripts/image-lib.sh

NAME=registry.k8s.io/pause:3.10
RECIPE=1

if [ "$(image_label "$NAME" io.workload-identity-webhook.pause)" = "$RECIPE" ]; then
  echo "$NAME"
  exit 0
fi
command -v gcc >/dev/null || die "gcc is not installed (apt-get install gcc libc6-dev)"
log "building $NAME (first run only)"
work=$(mktemp -d "${TMPDIR:-/tmp}/wiw-pause-XXXXXX")
ctr=
cleanup() {
  if [ -n "$ctr" ]; then bh rm "$ctr" >/dev/null 2>&1 || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

cat >"$work/pause.c" <<'C'
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void stop(int sig) { (void)sig; _exit(0); }

static void reap(int sig) {
  (void)sig;
  while (waitpid(-1, NULL, WNOHANG) > 0) {
  }
}

int main(void) {
  struct sigaction exit_on = {.sa_handler = stop};
  struct sigaction reap_on = {.sa_handler = reap, .sa_flags = SA_NOCLDSTOP};
  if (sigaction(SIGINT, &exit_on, NULL) < 0 || sigaction(SIGTERM, &exit_on, NULL) < 0 ||
      sigaction(SIGCHLD, &reap_on, NULL) < 0)
    return 1;
  for (;;) pause();
}
C
gcc -static -Os -s -o "$work/pause" "$work/pause.c"

ctr=$(bh from scratch)
bh copy "$ctr" "$work/pause" /pause >/dev/null
bh config --entrypoint '["/pause"]' --user 65535:65535 --os linux --arch amd64 \
  --label io.workload-identity-webhook.pause="$RECIPE" "$ctr"
bh commit --quiet --rm "$ctr" "$NAME" >/dev/null
ctr=
echo "$NAME"
