#!/usr/bin/env bash
# Checks the pod network of kind cluster $1 (hack/kind/node/pod-network.sh):
# every node has its own podCIDR; the pod on each worker
# (deploy/kind/pod-network-check.yaml) has an address of its node's podCIDR,
# and each pod reaches the next one's, on another node, and is seen there
# with its own pod IP (routed, not masqueraded). All traffic stays inside the container
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
workers=$("${kubectl[@]}" get nodes -l '!node-role.kubernetes.io/control-plane' -o name | grep -c .)
[ ${#pods[@]} = "$workers" ] || fail "want a peer pod on each of the $workers workers, got: ${pods[*]}"
[ "$(printf '%s\n' "${pods[@]}" | awk '{print $3}' | sort -u | grep -c .)" = "$workers" ] ||
  fail "two peers share a node: ${pods[*]}"
for pod in "${pods[@]}"; do
  read -r name ip node <<<"$pod"
  cidr=$("${kubectl[@]}" get node "$node" -o jsonpath='{.spec.podCIDR}')
  python3 -c 'import ipaddress, sys; sys.exit(ipaddress.ip_address(sys.argv[1]) not in ipaddress.ip_network(sys.argv[2]))' \
    "$ip" "$cidr" || fail "$name's address $ip is not in $node's podCIDR $cidr"
done

# A ring: each pod asks the next, so every pod asks one and is asked by one.
ask='import sys, urllib.request; print(urllib.request.urlopen(f"http://{sys.argv[1]}:8080/", timeout=10).read().decode())'
for i in "${!pods[@]}"; do
  read -r from from_ip from_node <<<"${pods[$i]}"
  read -r _ to_ip to_node <<<"${pods[$(((i + 1) % ${#pods[@]}))]}"
  seen=$("${kubectl[@]}" -n "$namespace" exec "$from" -- python -c "$ask" "$to_ip") ||
    fail "$from on $from_node cannot reach $to_ip on $to_node"
  [ "$seen" = "$from_ip" ] || fail "the peer at $to_ip saw $from as $seen, not as its pod IP $from_ip"
  echo "kind-e2e: pod $from_ip on $from_node reached pod $to_ip on $to_node, which saw $seen" >&2
done
"${kubectl[@]}" delete namespace "$namespace" --wait=false >/dev/null
