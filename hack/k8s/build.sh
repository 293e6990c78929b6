#!/usr/bin/env bash
# Builds kube-apiserver, kube-controller-manager, kube-scheduler, kubelet and
# kube-proxy from their Go module into OUT; binaries already there are kept.
#   K8S_VERSION  Kubernetes version (default: the one pinned in hack/k8s/go.mod);
#                another version is built from a module hack/k8s/module.sh writes
#   K8S_COMMANDS the commands to build (default: all five)
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

module=${K8S_MODULE:-$here}
if [ -z "${K8S_MODULE:-}" ] && [ "$version" != "$pinned" ]; then
  module=$(mktemp -d)
  trap 'rm -rf "$module"' EXIT
  "$here/module.sh" "$version" "$module" trainium-dra/hack/k8s "${commands[@]}"
fi
minor=${version#v1.}
minor=${minor%%.*}
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $pkg.gitVersion=$version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
  ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
done
for cmd in "${missing[@]}"; do
  log "building $cmd $version (first time only; several minutes)"
  start=$SECONDS
  (cd "$module" && CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" \
    -o "$out/$cmd.tmp" "k8s.io/kubernetes/cmd/$cmd")
  mv "$out/$cmd.tmp" "$out/$cmd"
  log "built $cmd $version in $((SECONDS - start)) s"
done
