#!/usr/bin/env bash
# Builds a kube-scheduler whose allocator checks a device's counters before its
# CEL selectors: counters-first.patch (ours; docs/scale.md, "Counters before
# selectors") applied to a copy of the k8s.io/dynamic-resource-allocation
# module taken from the Go module cache, used through a `replace` in a copy of
# the control plane's module (hack/k8s). Opt-in: no cluster of `make demo` or
# `make test` runs it; `make bench-scheduler BENCH_ARGS='--steps occupancy
# --scheduler counters-first'` and `make test-counters-first` do.
# Cached outside the repo, keyed by Kubernetes version and the patch's hash; a
# second run builds nothing.
#   K8S_VERSION         Kubernetes version (default: the one pinned in hack/k8s/go.mod)
#   TRAINIUM_DRA_CACHE  cache root (default: ~/.cache/trainium-dra)
# Prints the kube-scheduler's path on its last line.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
k8s=$(cd "$here/../k8s" && pwd)
patch_file=$here/counters-first.patch
pinned=$(cd "$k8s" && go list -m -f '{{.Version}}' k8s.io/kubernetes)
version=${K8S_VERSION:-$pinned}
key=$version-$(sha256sum "$patch_file" | cut -c1-12)
out=${TRAINIUM_DRA_CACHE:-$HOME/.cache/trainium-dra}/k8s-counters-first/$key
bin=$out/kube-scheduler
log() { echo "build-counters-first: $*" >&2; }

mkdir -p "$out"
exec 9>"$out/.build.lock"
flock 9
if [ ! -x "$bin" ]; then
  # The staging modules of Kubernetes v1.X.Y are published as v0.X.Y.
  module_version=v0.${version#v1.}
  src=$out/dynamic-resource-allocation
  module=$out/module
  rm -rf "$src" "$module"
  log "patching k8s.io/dynamic-resource-allocation $module_version"
  upstream=$(go mod download -json "k8s.io/dynamic-resource-allocation@$module_version" |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["Dir"])')
  cp -r "$upstream" "$src"
  chmod -R u+w "$src"
  if ! (cd "$src" && git apply "$patch_file"); then
    log "counters-first.patch does not apply to k8s.io/dynamic-resource-allocation" \
      "$module_version; write it again against that version"
    exit 1
  fi
  mkdir -p "$module"
  if [ "$version" = "$pinned" ]; then
    cp "$k8s/go.mod" "$k8s/go.sum" "$module/"
  else
    "$k8s/module.sh" "$version" "$module" trainium-dra/hack/k8s kube-scheduler
  fi
  (cd "$module" && go mod edit -replace="k8s.io/dynamic-resource-allocation=$src")
  K8S_VERSION=$version K8S_MODULE=$module K8S_COMMANDS=kube-scheduler "$k8s/build.sh" "$out"
fi
echo "$bin"
