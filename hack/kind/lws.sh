#!/usr/bin/env bash
# Installs LeaderWorkerSet on kind cluster $1 from its own Helm chart, with
# its manager built here (hack/lws/build.sh, the version hack/lws/go.mod pins,
# as `make lws` builds it) alone in a one-layer image put on every node
# (hack/kind/manager-image.sh, never pulled) and named by the chart's image
# values. The chart is read from the Go module at run time and installed into
# lws-system, the namespace its CRD's conversion webhook names. The manager
# issues its own webhook certificate (the chart's default), which reaches its
# pod through a Secret volume some time after the pod is Ready: the script
# returns once the webhooks answer, so a LeaderWorkerSet applied after it is
# admitted. Run by `make kind-lws`.
#   TRAINIUM_DRA_CACHE  cache root (default: ~/.cache/trainium-dra)
set -euo pipefail
shopt -s inherit_errexit

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
# shellcheck source=../lib/webhooks.sh
. "$here/../lib/webhooks.sh"
cluster=${1:?usage: lws.sh CLUSTER}
kubectl=("${KUBECTL:-kubectl}" --context "kind-$cluster")
log() { echo "kind-lws: $*" >&2; }

dir=$("$root/hack/lws/build.sh")
version=$(cd "$root/hack/lws" && go list -m -f '{{.Version}}' sigs.k8s.io/lws)
chart=$(cd "$root/hack/lws" && go list -m -f '{{.Dir}}' sigs.k8s.io/lws)/charts/lws
"$here/manager-image.sh" "$cluster" lws "$dir/lws" "$version"
log "helm install lws $version from $chart"
# Small requests: the kind nodes share one machine (the chart asks for a CPU and 1Gi).
"${HELM:-helm}" upgrade --install lws "$chart" --kube-context "kind-$cluster" \
  --namespace lws-system --create-namespace \
  --set resources.requests.cpu=50m --set resources.requests.memory=64Mi \
  --set image.manager.repository=localhost/trainium-dra/lws \
  --set image.manager.tag="$version" --set image.manager.pullPolicy=Never \
  --wait=legacy --timeout 15m

# The chart fixes its manager's probes at a 1 s timeout, which fails on a
# machine at many times its CPUs' load, and runs its one replica with leader
# election, which a renewal missed there ends: each restart leaves the
# webhooks refusing. Both are relaxed here, and the manager rolled out anew.
"${kubectl[@]}" -n lws-system get configmap lws-manager-config -o json |
  sed 's/leaderElect: true/leaderElect: false/' | "${kubectl[@]}" replace -f - >/dev/null
"${kubectl[@]}" -n lws-system patch deployment lws-controller-manager --type=json -p '[
  {"op": "add", "path": "/spec/template/spec/containers/0/livenessProbe/timeoutSeconds", "value": 10},
  {"op": "add", "path": "/spec/template/spec/containers/0/livenessProbe/failureThreshold", "value": 6},
  {"op": "add", "path": "/spec/template/spec/containers/0/readinessProbe/timeoutSeconds", "value": 10}
]' >/dev/null
"${kubectl[@]}" -n lws-system rollout status deployment/lws-controller-manager --timeout=15m >/dev/null

# The smallest LeaderWorkerSet, created with a server-side dry run: it passes
# the manager's mutating and validating webhooks once they answer.
probe='{"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
  "metadata": {"name": "webhook-probe", "namespace": "default"},
  "spec": {"leaderWorkerTemplate": {"size": 1, "workerTemplate": {"spec":
    {"containers": [{"name": "probe", "image": "localhost/trainium-dra/driver:dev"}]}}}}}'
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "$probe" >"$work/probe.json"
# Until the CRD is served and the webhooks answer with the certificate.
out=$(while_webhooks_refuse 300 "no matches for kind" "${kubectl[@]}" create --dry-run=server -f "$work/probe.json")
log "webhooks answer: $out"
