#!/usr/bin/env bash
# Builds kube-network-policies, the NetworkPolicy agent of the real-node
# cluster, at the version go.mod here pins, into
# <cache>/node/kube-network-policies-<version>/; kept once built. The agent
# programs nftables through netlink and takes packets from NFQUEUE, so the
# kernel needs nf_tables and nfnetlink_queue (built in or loadable); `nft`
# (Debian's nftables) is installed to read its rules.
#   TRAINIUM_DRA_CACHE  cache root (default: ~/.cache/trainium-dra)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
module=sigs.k8s.io/kube-network-policies
version=$(cd "$here" && go list -m -f '{{.Version}}' "$module")
dir=${TRAINIUM_DRA_CACHE:-$HOME/.cache/trainium-dra}/node/kube-network-policies-$version
bin=$dir/kube-network-policies
log() { echo "build-kube-network-policies: $*" >&2; }
# shellcheck source=../lib/debian-packages.sh
. "$here/../lib/debian-packages.sh"

install_missing "reading the real nodes' NetworkPolicy rules" nft:nftables || true
[ -x "$bin" ] && exit 0
mkdir -p "$dir"
log "building kube-network-policies $version (first time only)"
(cd "$here" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$bin.tmp" \
  "$module/cmd/kube-network-policies/standard")
mv "$bin.tmp" "$bin"
