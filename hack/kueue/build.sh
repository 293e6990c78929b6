#!/usr/bin/env bash
# Builds Kueue's manager (cmd/kueue) at the version go.mod here pins into
# <cache>/kueue-<version>/kueue, and copies the module's CRDs and webhook
# manifests beside it (<cache>/kueue-<version>/config/{crd,webhook}/), which
# `trainium-dra up --with-kueue` reads at run time; kept once built.
#   TRAINIUM_DRA_CACHE  cache root (default: ~/.cache/trainium-dra)
# Prints the directory on its last line.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
module=sigs.k8s.io/kueue
version=$(cd "$here" && go list -m -f '{{.Version}}' "$module")
dir=${TRAINIUM_DRA_CACHE:-$HOME/.cache/trainium-dra}/kueue-$version
log() { echo "build-kueue: $*" >&2; }
if [ ! -x "$dir/kueue" ]; then
  mkdir -p "$dir"
  log "building kueue $version (first time only)"
  (cd "$here" && CGO_ENABLED=0 go build -trimpath \
    -ldflags "-s -w -X $module/pkg/version.GitVersion=$version" \
    -o "$dir/kueue.tmp" "$module/cmd/kueue")
  mv "$dir/kueue.tmp" "$dir/kueue"
fi
if [ ! -d "$dir/config" ]; then
  source=$(cd "$here" && go list -m -f '{{.Dir}}' "$module")
  mkdir -p "$dir/config.tmp"
  # The module cache is read-only; the copies need not be.
  cp -r --no-preserve=mode "$source/config/components/crd" "$source/config/components/webhook" \
    "$dir/config.tmp/"
  mv "$dir/config.tmp" "$dir/config"
fi
echo "$dir"
