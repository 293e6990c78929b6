#!/usr/bin/env bash
# Writes a Go module in DIR that builds the named k8s.io/kubernetes commands at
# VERSION: the staging modules are replaced at that release's own versions
# (v0.<minor>.<patch>), read from its go.mod. The committed modules are written
# with it:
#   hack/k8s/module.sh v1.37.2 hack/k8s "trainium-dra/hack/k8s" \
#     kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy
#   hack/k8s/module.sh v1.37.2 hack/kind/k8s "trainium-dra/hack/kind/k8s" kubeadm kubectl
# hack/build-binaries.sh uses it for a version other than the committed one.
set -euo pipefail

version=$1 dir=$2 name=$3
shift 3
mkdir -p "$dir"
cd "$dir"
rm -f go.mod go.sum
printf '// Written by hack/k8s/module.sh: %s at %s.\nmodule %s\n\ngo 1.26.0\n' "$*" "$version" "$name" > go.mod
go mod edit -require="k8s.io/kubernetes@$version"
go mod download -json "k8s.io/kubernetes@$version" >/dev/null
upstream=$(go env GOMODCACHE)/cache/download/k8s.io/kubernetes/@v/$version.mod
for staged in $(awk '/=> \.\/staging/ {print $1}' "$upstream"); do
  go mod edit -replace="$staged=$staged@v0.${version#v1.}"
done
tools=()
for cmd in "$@"; do tools+=("k8s.io/kubernetes/cmd/$cmd@$version"); done
go get -tool "${tools[@]}" >&2
