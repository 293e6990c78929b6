#!/usr/bin/env bash
# Builds what the kind path needs beyond `make binaries`, from Go modules at
# pinned versions, into the cache outside the repo; built binaries are kept:
#   kind                 sigs.k8s.io/kind (hack/kind/kind/go.mod) -> kind-<version>/bin/
#   kubeadm, kubectl     k8s.io/kubernetes (hack/kind/k8s/go.mod) -> k8s/<version>/
#   TRAINIUM_DRA_CACHE   cache root (default: ~/.cache/trainium-dra)
# kind-<version>/bin/ also links kubectl and the helm of `make binaries`
# (hack/build-binaries.sh), so that one directory on PATH gives all three.
# Prints that directory on its last line.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
cache=${TRAINIUM_DRA_CACHE:-$HOME/.cache/trainium-dra}
log() { echo "kind-tools: $*" >&2; }
pinned() { (cd "$here/$1" && go list -m -f '{{.Version}}' "$2"); }

kind_version=$(pinned kind sigs.k8s.io/kind)
k8s_version=$(pinned k8s k8s.io/kubernetes)
# deploy/kind/cluster.yaml names this release's gates and APIs.
if [ -n "${K8S_VERSION:-}" ] && [ "$K8S_VERSION" != "$k8s_version" ]; then
  log "K8S_VERSION=$K8S_VERSION: the kind path runs $k8s_version only (hack/kind/k8s/go.mod, deploy/kind/cluster.yaml)"
  exit 1
fi
bin_dir="$cache/kind-$kind_version/bin"
kind_bin="$bin_dir/kind"
k8s_dir="$cache/k8s/$k8s_version"
mkdir -p "$(dirname "$kind_bin")" "$k8s_dir"

# shellcheck source=../lib/go-build.sh
. "$here/../lib/go-build.sh"
if [ ! -x "$kind_bin" ]; then
  log "building kind $kind_version (first time only)"
  go_build "$here/kind" "$kind_bin.tmp" "" sigs.k8s.io/kind
  mv "$kind_bin.tmp" "$kind_bin"
fi
K8S_COMMANDS="kubeadm kubectl" K8S_MODULE="$here/k8s" "$here/../k8s/build.sh" "$k8s_dir"
helm_version=$(pinned ../helm helm.sh/helm/v4)
[ -x "$k8s_dir/helm-$helm_version" ] || { log "no helm in $k8s_dir: run make binaries first"; exit 1; }
ln -sfn "$k8s_dir/kubectl" "$bin_dir/kubectl"
ln -sfn "$k8s_dir/helm-$helm_version" "$bin_dir/helm"
echo "$bin_dir"
