#!/usr/bin/env bash
# Behaviour check of a refactoring: `preview` and `check-policy` output of two checkouts on the same
# inputs (scripts/preview-capture.ts lists them), diffed. Exit 0 when byte-identical.
#   bash scripts/preview-compare.sh BASE_CHECKOUT [HEAD_CHECKOUT (default: this one)] [OUTDIR]
set -euo pipefail
# A failure inside $(...) stops the script too (bash leaves errexit off there by default).
shopt -s inherit_errexit
here=$(cd "$(dirname "$0")/.." && pwd)
base=$(cd "${1:?usage: preview-compare.sh BASE_CHECKOUT [HEAD_CHECKOUT] [OUTDIR]}" && pwd)
head=$(cd "${2:-$here}" && pwd)
out=${3:-$(mktemp -d -t wiw-preview-compare-XXXXXX)}
for side in base head; do
  dir=${!side}
  [ -d "$dir/node_modules" ] || { echo "$dir: run npm ci there first" >&2; exit 2; }
  rm -rf "${out:?}/$side" && mkdir -p "$out/$side"
  node "$here/scripts/preview-capture.ts" "$dir" "$out/$side"
done
cases=$(find "$out/head" -maxdepth 1 -name '*.txt' | wc -l)
if diff -r -x inputs "$out/base" "$out/head" >"$out/diff.txt"; then
  echo "byte-identical: $cases cases ($base vs $head), outputs in $out"
else
  echo "$(grep -c '^diff ' "$out/diff.txt" || true) of $cases cases differ ($base vs $head): $out/diff.txt" >&2
  exit 1
fi
