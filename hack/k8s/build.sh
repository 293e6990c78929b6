#!/usr/bin/env bash
# Builds kube-apiserver, kube-controller-manager, kube-scheduler, kubelet and
# kube-proxy from their Go module into OUT, in one `go build`
# (hack/lib/go-build.sh); binaries already there are kept.
#   K8S_VERSION  Kubernetes version (default: the one pinned in hack/k8s/go.mod);
#                another version is built from a module hack/k8s/module.sh writes
#   K8S_COMMANDS the commands to build (default: all five; kind's tools pass
#                kubeadm and kubectl with hack/kind/k8s as K8S_MODULE)
#   K8S_MODULE   the Go module to build them from (default: this one, or the
#                one module.sh writes for another version), e.g. a copy with a
#                patched dependency (hack/k8s-counters-first/build.sh)
# The binaries report that version (`kube-apiserver --version`).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
out=$1
pinned=$(cd "$here" && go list -m -f '{{.Version}}' k8s.io/kubernetes)
version=${K8S_VERSION:-$pinned}
read -r -a commands <<<"${K8S_COMMANDS:-kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy}"
log() { echo "build-k8s: $*" >&2; }

missing=()
for cmd in "${commands[@]}"; do
  [ -x "$out/$cmd" ] || missing+=("$cmd")
done
[ ${#missing[@]} -gt 0 ] || exit 0
mkdir -p "$out"
# What a build leaves behind, removed however it ends.
scratch=()
trap 'rm -rf "${scratch[@]}"' EXIT

module=${K8S_MODULE:-$here}
if [ -z "${K8S_MODULE:-}" ] && [ "$version" != "$pinned" ]; then
  module=$(mktemp -d)
  scratch+=("$module")
  "$here/module.sh" "$version" "$module" trainium-dra/hack/k8s "${commands[@]}"
fi
minor=${version#v1.}
minor=${minor%%.*}
ldflags=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $pkg.gitVersion=$version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
  ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
done
# shellcheck source=../lib/go-build.sh
. "$here/../lib/go-build.sh"
log "building ${missing[*]} $version (first time only; several minutes)"
start=$SECONDS
staging=$(mktemp -d "$out/.build.XXXXXX")
scratch+=("$staging")
go_build "$module" "$staging/" "$ldflags" "${missing[@]/#/k8s.io/kubernetes/cmd/}"
for cmd in "${missing[@]}"; do
  mv "$staging/$cmd" "$out/$cmd"
done
log "built ${missing[*]} $version in $((SECONDS - start)) s"
