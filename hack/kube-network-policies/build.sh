#!/usr/bin/env bash
# Builds kube-network-policies, the NetworkPolicy agent of the real-node
# cluster, at the version go.mod here pins, into
# <cache>/node/kube-network-policies-<version>/; kept once built. It talks to
# the kernel through netlink (NFQUEUE, conntrack, nftables): no Debian
# package is needed (docs/real-nodes.md says what the kernel needs).
#   TRAINIUM_DRA_CACHE  cache root (default: ~/.cache/trainium-dra)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
module=sigs.k8s.io/kube-network-policies
version=$(cd "$here" && go list -m -f '{{.Version}}' "$module")
dir=${TRAINIUM_DRA_CACHE:-$HOME/.cache/trainium-dra}/node/kube-network-policies-$version
bin=$dir/kube-network-policies
log() { echo "build-kube-network-policies: $*" >&2; }
[ -x "$bin" ] && exit 0
mkdir -p "$dir"
log "building kube-network-policies $version (first time only)"
# shellcheck source=../lib/go-build.sh
. "$here/../lib/go-build.sh"
go_build "$here" "$bin.tmp" "" "$module/cmd/kube-network-policies/standard"
mv "$bin.tmp" "$bin"
