#!/usr/bin/env bash
# A Python virtualenv holding the official cloud SDKs that the SDK proof (test/e2e/sdk-*.test.ts)
# runs: boto3, azure-identity and google-auth (+ requests, its HTTP transport), pinned.
# Prints the venv's python on stdout (progress goes to stderr). The venv lives under the cache,
# named by a hash of the pins and the interpreter's version, so a second run is instant and a
# change of pins builds a new one beside the old.
set -euo pipefail
# A failure inside $(...) stops the script too (bash leaves errexit off there by default).
shopt -s inherit_errexit

REQUIREMENTS='boto3==1.44.5
azure-identity==1.27.0
google-auth==2.62.2
requests==2.34.2'

PYTHON=${WIW_BASE_PYTHON:-python3}
CACHE=${WIW_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/workload-identity-webhook}
log() { echo "python-sdks.sh: $*" >&2; }

command -v "$PYTHON" >/dev/null 2>&1 || { log "$PYTHON not found: the Python SDK proof needs Python 3.9 or later"; exit 1; }
py_version=$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
hash=$(printf '%s\npython %s\n' "$REQUIREMENTS" "$py_version" | sha256sum | cut -c1-16)
venv=$CACHE/python-sdks-$hash
stamp=$venv/.complete

if [ ! -f "$stamp" ]; then
  mkdir -p "$CACHE"
  # Two runs at once (two checkouts, two terminals) must not build into the same folder.
  exec 9>"$venv.lock"
  flock 9
  if [ ! -f "$stamp" ]; then
    log "creating $venv (Python $py_version) with the pinned SDKs"
    rm -rf "$venv"
    "$PYTHON" -m venv "$venv" >&2
    printf '%s\n' "$REQUIREMENTS" >"$venv/requirements.txt"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-input \
      --requirement "$venv/requirements.txt" >&2
    touch "$stamp"
  fi
  exec 9>&-
fi

echo "$venv/bin/python"
