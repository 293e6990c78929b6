#!/usr/bin/env bash
# Builds the kubelet plugin of sigs.k8s.io/dra-example-driver, the Go
# reference that `make bench-node` runs beside our node daemon, from its Go
# module into a cache outside the repo; a binary already there is kept.
#   DRA_EXAMPLE_DRIVER_VERSION  module version (default below; the module
#                               proxy serves v0.4.0)
#   TRAINIUM_DRA_CACHE          cache root (default: ~/.cache/trainium-dra)
# Prints the path of the binary on its last line.
set -euo pipefail

version=${DRA_EXAMPLE_DRIVER_VERSION:-v0.4.0}
cache=${TRAINIUM_DRA_CACHE:-$HOME/.cache/trainium-dra}
out="$cache/dra-example-driver-$version"
binary="$out/dra-example-kubeletplugin"

if [ ! -x "$binary" ]; then
  echo "build-dra-example-driver: building dra-example-kubeletplugin $version into $out" >&2
  mkdir -p "$out"
  # Built inside the downloaded module with its own go.mod and go.sum (`go
  # install pkg@version` would also ask the proxy for the version list, which
  # it refuses for this module).
  src=$(go mod download -json "sigs.k8s.io/dra-example-driver@$version" |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["Dir"])')
  (cd "$src" && GOFLAGS=-mod=readonly CGO_ENABLED=0 \
    go build -o "$binary" ./cmd/dra-example-kubeletplugin) >&2
fi
echo "$binary"
