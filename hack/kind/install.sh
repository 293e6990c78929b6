#!/usr/bin/env bash
# Installs or upgrades the chart on kind cluster $1 with
# deploy/values/kind.yaml and then each values file after it (`make
# kind-install` gives none, `make kind-aws` deploy/values/kind-aws.yaml), the
# image $IMAGE_REPO:$IMAGE_TAG that `make kind-load` put on the nodes, and
# prints the UltraServers once the controller's slices are there: for every
# node, and none left of another driver name (after a change of profile the
# new controller deletes what the old one published for its racks when it
# takes the Lease).
set -euo pipefail
shopt -s inherit_errexit

root=$(cd "$(dirname "$0")/../.." && pwd)
cluster=${1:?usage: install.sh CLUSTER [VALUES...]}
shift
kubectl=("${KUBECTL:-kubectl}" --context "kind-$cluster")
log() { echo "kind-install: $*" >&2; }
values=(--values "$root/deploy/values/kind.yaml")
for file in "$@"; do
  values+=(--values "$root/$file")
done

# --wait=legacy: until the controller and node daemon pods are ready, for up
# to 15 min on a machine loaded many times over (it returns once they are;
# a rolling update waits out the old leader's Lease). (Helm's
# default watcher also waits for the UltraServer to be Ready, which it is not
# while servers lack nodes, as on the one-node cluster: 1/4 servers.)
"${HELM:-helm}" upgrade --install trainium-dra "$root/charts/trainium-dra" --kube-context "kind-$cluster" \
  --namespace trainium-dra --create-namespace "${values[@]}" \
  --set image.repository="${IMAGE_REPO:?}" --set image.tag="${IMAGE_TAG:?}" --wait=legacy --timeout 15m

args=$("${kubectl[@]}" -n trainium-dra get daemonset trainium-dra-node -o jsonpath='{.spec.template.spec.containers[0].args}')
driver=$(grep -oE -- '--driver-name=[^"]+' <<<"$args")
driver=${driver#--driver-name=}
# Every node publishes devices of this driver (the kind nodes are all the
# UltraServer's): by spec.nodeName (the AWS profile's pool per node) or by
# name in a node selector (the trainium profile's server slices).
nodes=$("${kubectl[@]}" get nodes -o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}' | sort)
for _ in {1..300}; do
  stale=$("${kubectl[@]}" get resourceslices -l app.kubernetes.io/managed-by=trainium-dra-controller \
    --field-selector "spec.driver!=$driver" -o name)
  published=$("${kubectl[@]}" get resourceslices --field-selector "spec.driver=$driver" -o \
    jsonpath='{range .items[*]}{.spec.nodeName}{.spec.nodeSelector.nodeSelectorTerms[0].matchFields[0].values[0]}{"\n"}{end}' |
    sed '/^$/d' | sort -u)
  if [ -z "$stale" ] && [ -z "$(comm -23 <(echo "$nodes") <(echo "$published"))" ]; then
    "${kubectl[@]}" get ultraservers
    exit 0
  fi
  sleep 2
done
log "$driver publishes devices of [$(echo $published)] after 600 s, want [$(echo $nodes)];" \
  "slices of another driver: [$(echo $stale)]"
exit 1
