#!/bin/bash
# The pod network of a kind node, instead of kindnetd (whose image would come
# from a registry). Once the kubelet has registered, it reads the Nodes through
# the kubelet's own kubeconfig, every few seconds (on the control-plane node
# it first grants the nodes that read, node-reader.yaml), and keeps:
#   - the bridge CNI config with this node's spec.podCIDR (from the template
#     pod-network.conflist; the controller-manager allocates one per node);
#   - a route to every other node's podCIDR via that node's InternalIP (all
#     nodes share the container engine's network, one hop apart);
#   - masquerading of pod traffic that leaves the cluster's pod subnets, so a
#     pod reaching another node's pod keeps its own address.
# It enforces no NetworkPolicy and carries no IPv6.
set -euo pipefail

kubeconfig=/etc/kubernetes/kubelet.conf
admin=/etc/kubernetes/admin.conf # only on the control-plane node
reader=/usr/local/share/trainium-dra/node-reader.yaml
template=/usr/local/share/trainium-dra/pod-network.conflist
conflist=/etc/cni/net.d/10-trainium-dra.conflist
node=$(uname -n)
route_proto=200 # marks the routes this script owns, so stale ones can go
chain=TRAINIUM-DRA-POD-MASQ
log() { echo "pod-network: $*" >&2; }

# "name podCIDR InternalIP" per Node, sorted; empty podCIDR when not allocated yet.
read_nodes() {
  kubectl --kubeconfig "$kubeconfig" get nodes -o \
    jsonpath='{range .items[*]}{.metadata.name} {.spec.podCIDR} {.status.addresses[?(@.type=="InternalIP")].address}{"\n"}{end}' |
    sort
}

write_conflist() {
  local want
  want=$(sed "s|@POD_CIDR@|$1|" "$template")
  [ "$(cat "$conflist" 2>/dev/null)" = "$want" ] && return
  printf '%s\n' "$want" > "$conflist.tmp"
  mv "$conflist.tmp" "$conflist"
  log "CNI config for $1"
}

# $1: this node's podCIDR; stdin: the other nodes' "podCIDR InternalIP" lines.
sync_routes_and_masquerade() {
  local own=$1 cidr ip wanted=() current
  iptables -t nat -N "$chain" 2>/dev/null || iptables -t nat -F "$chain"
  while read -r cidr ip; do
    ip route replace "$cidr" via "$ip" proto "$route_proto"
    iptables -t nat -A "$chain" -d "$cidr" -j RETURN
    wanted+=("$cidr")
  done
  iptables -t nat -A "$chain" -d "$own" -j RETURN
  iptables -t nat -A "$chain" -j MASQUERADE
  iptables -t nat -C POSTROUTING -s "$own" -j "$chain" 2>/dev/null ||
    iptables -t nat -A POSTROUTING -s "$own" -j "$chain"
  for current in $(ip route show proto "$route_proto" | cut -d' ' -f1); do
    [[ " ${wanted[*]} " == *" $current "* ]] || ip route del "$current" proto "$route_proto"
  done
}

granted=no
last=
while true; do
  if [ "$granted" = no ] && [ -s "$admin" ] && kubectl --kubeconfig "$admin" apply -f "$reader" >/dev/null 2>&1; then
    granted=yes
    log "nodes may read all Nodes"
  fi
  nodes=$(read_nodes 2>/dev/null) || nodes=
  own=$(awk -v n="$node" '$1 == n {print $2}' <<<"$nodes")
  if [ -n "$own" ] && [ "$nodes" != "$last" ]; then
    write_conflist "$own"
    awk -v n="$node" '$1 != n && $2 != "" && $3 != "" {print $2, $3}' <<<"$nodes" | sync_routes_and_masquerade "$own"
    log "routes to: $(ip route show proto "$route_proto" | tr '\n' ';')"
    last=$nodes
  fi
  if [ -n "$last" ]; then sleep 5; else sleep 1; fi
done
