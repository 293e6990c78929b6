#!/bin/bash
# The pod network of a kind node, instead of kindnetd (whose image would come
# from a registry). Once the kubelet has registered, it watches the Nodes
# through the kubelet's own kubeconfig (on the control-plane node it first
# grants the nodes that read, node-reader.yaml) and, on every change, keeps:
#   - the bridge CNI config with this node's spec.podCIDR (from the template
#     pod-network.conflist; the controller-manager allocates one per node);
#   - a route to every other node's podCIDR via that node's InternalIP (all
#     nodes share the container engine's network, one hop apart);
#   - masquerading of pod traffic that leaves the cluster's pod subnets, so a
#     pod reaching another node's pod keeps its own address.
# It enforces no NetworkPolicy and carries no IPv6. It exits when it cannot
# watch (no kubeconfig yet, apiserver down, watch closed); systemd restarts it.
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

# "name,podCIDR,InternalIP" per Node, sorted; fields are empty until set
# (commas, as awk would merge the blanks around an empty field).
read_nodes() {
  kubectl --kubeconfig "$kubeconfig" get nodes -o \
    jsonpath='{range .items[*]}{.metadata.name},{.spec.podCIDR},{.status.addresses[?(@.type=="InternalIP")].address}{"\n"}{end}' |
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
  local own=$1 cidr ip wanted= current
  iptables -t nat -N "$chain" 2>/dev/null || iptables -t nat -F "$chain"
  while read -r cidr ip; do
    ip route replace "$cidr" via "$ip" proto "$route_proto"
    iptables -t nat -A "$chain" -d "$cidr" -j RETURN
    wanted+="$cidr"$'\n'
  done
  iptables -t nat -A "$chain" -d "$own" -j RETURN
  iptables -t nat -A "$chain" -j MASQUERADE
  iptables -t nat -C POSTROUTING -s "$own" -j "$chain" 2>/dev/null ||
    iptables -t nat -A POSTROUTING -s "$own" -j "$chain"
  for current in $(ip route show proto "$route_proto" | cut -d' ' -f1); do
    grep -qxF "$current" <<<"$wanted" || ip route del "$current" proto "$route_proto"
  done
}

sync_node_network() {
  local nodes own routes
  nodes=$(read_nodes)
  own=$(awk -F, -v n="$node" '$1 == n {print $2}' <<<"$nodes")
  [ -n "$own" ] && [ "$nodes" != "$last" ] || return 0
  write_conflist "$own"
  awk -F, -v n="$node" '$1 != n && $2 != "" && $3 != "" {print $2, $3}' <<<"$nodes" | sync_routes_and_masquerade "$own"
  routes=$(ip route show proto "$route_proto")
  log "routes: ${routes//$'\n'/; }"
  last=$nodes
}

[ -s "$kubeconfig" ] || { log "waiting for $kubeconfig"; exit 1; }
if [ -s "$admin" ]; then
  kubectl --kubeconfig "$admin" apply -f "$reader" >/dev/null
fi
last=
# A line per Node event; each one re-reads all Nodes.
while read -r _; do
  sync_node_network
done < <(kubectl --kubeconfig "$kubeconfig" get nodes --watch -o name)
log "the watch of Nodes ended"
exit 1
