#!/usr/bin/env bash
# Builds hack/slice-anchor/main.go against the upstream ResourceSlice
# controller (k8s.io/dynamic-resource-allocation) in a temporary module, into
# the cache outside the repo; a binary already there is kept.
#   DRA_VERSION         module version (default v0.36.3: the previous release, the
#                       one the controller benchmark's anchor was last measured on)
#   TRAINIUM_DRA_CACHE  cache root (default: ~/.cache/trainium-dra)
# Prints the binary's path.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
version=${DRA_VERSION:-v0.36.3}
cache=${TRAINIUM_DRA_CACHE:-$HOME/.cache/trainium-dra}
out="$cache/slice-anchor-$version/slice-anchor"
source_sum=$(sha256sum "$here/main.go" | cut -c1-16)
if [ -x "$out" ] && [ "$(cat "$out.source" 2>/dev/null)" = "$source_sum" ]; then
  echo "$out"
  exit 0
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cp "$here/main.go" "$dir/"
(
  cd "$dir"
  go mod init trainium-dra/slice-anchor >/dev/null 2>&1
  go get "k8s.io/dynamic-resource-allocation@$version" "k8s.io/client-go@$version" \
    "k8s.io/api@$version" >&2
  go mod tidy >&2
  mkdir -p "$(dirname "$out")"
  go build -o "$out" . >&2
)
echo "$source_sum" > "$out.source"
echo "$out"
