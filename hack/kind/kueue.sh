#!/usr/bin/env bash
# Installs Kueue on kind cluster $1 from its own Helm chart, with an image
# built here: Kueue's manager (hack/kueue/build.sh, the version its go.mod
# pins) alone in a one-layer image put on every node (hack/kind/manager-image.sh,
# never pulled) and named by the chart's image values. The chart
# is read from the Go module at run time. The manager's configuration and the
# default queues are those of `trainium-dra up --with-kueue`, made from the
# cluster's DeviceClasses, UltraServers and Nodes by
# localsim/kueue/chartvalues.py (the `DynamicResourceAllocation` gate,
# a `deviceClassMappings` entry per DeviceClass with an extended resource
# name, the ClusterQueue `trainium` holding the cluster). Run by `make
# kind-kueue`.
#   TRAINIUM_DRA_CACHE  cache root (default: ~/.cache/trainium-dra)
set -euo pipefail
shopt -s inherit_errexit

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
# shellcheck source=../lib/webhooks.sh
. "$here/../lib/webhooks.sh"
cluster=${1:?usage: kueue.sh CLUSTER}
kubectl=("${KUBECTL:-kubectl}" --context "kind-$cluster")
log() { echo "kind-kueue: $*" >&2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

dir=$("$root/hack/kueue/build.sh")
version=$(cd "$root/hack/kueue" && go list -m -f '{{.Version}}' sigs.k8s.io/kueue)
chart=$(cd "$root/hack/kueue" && go list -m -f '{{.Dir}}' sigs.k8s.io/kueue)/charts/kueue
repository=localhost/trainium-dra/kueue
"$here/manager-image.sh" "$cluster" kueue "$dir/kueue" "$version"
"${kubectl[@]}" get deviceclasses,ultraservers,nodes -o json |
  "$root/.venv/bin/python" -m localsim.kueue.chartvalues "$work/values.yaml" "$work/queues.yaml"
log "helm install kueue $version from $chart"
# Small requests: the kind nodes share one machine (the chart asks for 500m).
# Probes with time to answer: the chart's 1 s timeout fails on a machine at
# many times its CPUs' load, and each restart leaves the webhooks refusing.
"${HELM:-helm}" upgrade --install kueue "$chart" --kube-context "kind-$cluster" \
  --namespace kueue-system --create-namespace --values "$work/values.yaml" \
  --set controllerManager.manager.resources.requests.cpu=50m \
  --set controllerManager.manager.resources.requests.memory=128Mi \
  --set controllerManager.livenessProbe.timeoutSeconds=10 \
  --set controllerManager.livenessProbe.failureThreshold=6 \
  --set controllerManager.readinessProbe.timeoutSeconds=10 \
  --set controllerManager.manager.image.repository="$repository" \
  --set controllerManager.manager.image.tag="$version" \
  --set controllerManager.manager.image.pullPolicy=Never \
  --wait=legacy --timeout 15m

# Helm's wait ends when the manager's pod is ready, which can be before its
# webhook Service routes to it.
out=$(while_webhooks_refuse 300 "" "${kubectl[@]}" apply -f "$work/queues.yaml")
"${kubectl[@]}" wait --for=condition=Active --timeout=240s clusterqueue/trainium >/dev/null
log "default queues: ${out//$'\n'/, }"
