#!/usr/bin/env bash
# Checks the pod network of kind cluster $1 (hack/kind/node/pod-network.sh):
# every node has its own podCIDR; the pod on each worker
# (deploy/kind/pod-network-check.yaml) has an address of its node's podCIDR,
# and each pod reaches the other across nodes and is seen there with its own
# pod IP (routed, not masqueraded). All traffic stays inside the container
# engine's network. Deletes its pods afterwards. Run by hack/kind/e2e.sh.
set -euo pipefail
shopt -s inherit_errexit

root=$(cd "$(dirname "$0")/../.." && pwd)
cluster=${1:?usage: check-pod-network.sh CLUSTER}
kubectl=("${KUBECTL:-kubectl}" --context "kind-$cluster")
namespace=kind-pod-network
fail() { echo "kind-e2e: FAILED: $*" >&2; exit 1; }

cidrs=$("${kubectl[@]}" get nodes -o jsonpath='{range .items[*]}{.spec.podCIDR}{"\n"}{end}')
[ "$(sort -u <<<"$cidrs" | grep -c .)" = "$("${kubectl[@]}" get nodes -o name | grep -c .)" ] ||
  fail "nodes without a podCIDR of their own: $(echo $cidrs)"

"${kubectl[@]}" apply -f "$root/deploy/kind/pod-network-check.yaml" >/dev/null
"${kubectl[@]}" -n "$namespace" rollout status daemonset/peer --timeout=2m >/dev/null
mapfile -t pods < <("${kubectl[@]}" -n "$namespace" get pods -l app=peer -o \
  jsonpath='{range .items[*]}{.metadata.name} {.status.podIP} {.spec.nodeName}{"\n"}{end}')
[ ${#pods[@]} = 2 ] || fail "want a peer pod on each of the two workers, got: ${pods[*]}"
read -r a ip_a node_a <<<"${pods[0]}"
read -r b ip_b node_b <<<"${pods[1]}"
[ "$node_a" != "$node_b" ] || fail "both peers run on $node_a"
for pod in "$a $ip_a $node_a" "$b $ip_b $node_b"; do
  read -r name ip node <<<"$pod"
  cidr=$("${kubectl[@]}" get node "$node" -o jsonpath='{.spec.podCIDR}')
  python3 -c 'import ipaddress, sys; sys.exit(ipaddress.ip_address(sys.argv[1]) not in ipaddress.ip_network(sys.argv[2]))' \
    "$ip" "$cidr" || fail "$name's address $ip is not in $node's podCIDR $cidr"
done

ask='import sys, urllib.request; print(urllib.request.urlopen(f"http://{sys.argv[1]}:8080/", timeout=10).read().decode())'
for pair in "$a $ip_a $node_a $ip_b $node_b" "$b $ip_b $node_b $ip_a $node_a"; do
  read -r from from_ip from_node to_ip to_node <<<"$pair"
  seen=$("${kubectl[@]}" -n "$namespace" exec "$from" -- python -c "$ask" "$to_ip") ||
    fail "$from on $from_node cannot reach $to_ip on $to_node"
  [ "$seen" = "$from_ip" ] || fail "the peer at $to_ip saw $from as $seen, not as its pod IP $from_ip"
  echo "kind-e2e: pod $from_ip on $from_node reached pod $to_ip on $to_node, which saw $seen" >&2
done
"${kubectl[@]}" delete namespace "$namespace" --wait=false >/dev/null
