#!/usr/bin/env bash
# Installs Kueue on kind cluster $1 from its own Helm chart, with an image
# built here: Kueue's manager (hack/kueue/build.sh, the version its go.mod
# pins) alone in a one-layer image that runs as a non-root user, as the
# chart's securityContext asks, kept as an OCI archive in the cache, put on
# every node (never pulled) and named by the chart's image values. The chart
# is read from the Go module at run time. Run by `make kind-kueue`.
#   TRAINIUM_DRA_CACHE  cache root (default: ~/.cache/trainium-dra)
set -euo pipefail
shopt -s inherit_errexit

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cluster=${1:?usage: kueue.sh CLUSTER}
cache=${TRAINIUM_DRA_CACHE:-$HOME/.cache/trainium-dra}
log() { echo "kind-kueue: $*" >&2; }

dir=$("$root/hack/kueue/build.sh")
version=$(cd "$root/hack/kueue" && go list -m -f '{{.Version}}' sigs.k8s.io/kueue)
chart=$(cd "$root/hack/kueue" && go list -m -f '{{.Dir}}' sigs.k8s.io/kueue)/charts/kueue
repository=localhost/trainium-dra/kueue
archive="$cache/images/kueue-$version.tar"
if [ ! -f "$archive" ]; then
  log "image $repository:$version from $dir/kueue"
  mkdir -p "$(dirname "$archive")"
  # 65532: the unprivileged user of the images upstream publishes.
  python3 "$root/hack/images/oci_archive.py" --out "$archive.partial" --ref "$repository:$version" \
    --file "$dir/kueue:/manager:0755" --entrypoint '["/manager"]' --user 65532:65532 >/dev/null
  mv "$archive.partial" "$archive"
fi
"${KIND:-kind}" load image-archive "$archive" --name "$cluster"
log "helm install kueue $version from $chart"
"${HELM:-helm}" upgrade --install kueue "$chart" --kube-context "kind-$cluster" \
  --namespace kueue-system --create-namespace \
  --set controllerManager.manager.image.repository="$repository" \
  --set controllerManager.manager.image.tag="$version" \
  --set controllerManager.manager.image.pullPolicy=Never \
  --wait=legacy --timeout 5m
