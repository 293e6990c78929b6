#!/usr/bin/env bash
# Checks that the chart runs on every node of kind cluster $1: a ready node
# daemon on each node (the control plane too: the daemon tolerates its
# taint), and the controller's UltraServer kind-rack with its servers mapped
# to the nodes by their server-index labels (deploy/kind/cluster.yaml), each
# node's devices published. Run by hack/kind/e2e.sh.
set -euo pipefail
shopt -s inherit_errexit

cluster=${1:?usage: check-rack.sh CLUSTER}
kubectl=("${KUBECTL:-kubectl}" --context "kind-$cluster")
fail() { echo "kind-e2e: FAILED: $*" >&2; exit 1; }

nodes=$("${kubectl[@]}" get nodes -o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}' | sort)
count=$(grep -c . <<<"$nodes")
daemons=$("${kubectl[@]}" -n trainium-dra get pods -l app.kubernetes.io/component=node -o \
  jsonpath='{range .items[?(@.status.containerStatuses[0].ready==true)]}{.spec.nodeName}{"\n"}{end}' | sort)
[ "$daemons" = "$nodes" ] || fail "ready node daemons on [$(echo $daemons)], want one on each of [$(echo $nodes)]"

"${kubectl[@]}" wait ultraserver/kind-rack --for=jsonpath='{.status.servers.mapped}'="$count" --timeout=240s >/dev/null ||
  fail "kind-rack maps $("${kubectl[@]}" get ultraserver kind-rack -o jsonpath='{.status.servers.summary}') servers, want $count"
# A server's slices select its node by name (metadata.name), not spec.nodeName.
published=$("${kubectl[@]}" get resourceslices -l trainium.sim.dev/ultraserver=kind-rack -o \
  jsonpath='{range .items[*]}{.spec.nodeSelector.nodeSelectorTerms[0].matchFields[0].values[0]}{"\n"}{end}' |
  sed '/^$/d' | sort -u)
[ "$published" = "$nodes" ] || fail "kind-rack publishes devices of [$(echo $published)], want [$(echo $nodes)]"
echo "kind-e2e: kind-rack: servers $("${kubectl[@]}" get ultraserver kind-rack -o jsonpath='{.status.servers.summary}') on [$(echo $nodes)]" >&2
