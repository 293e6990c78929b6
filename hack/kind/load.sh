#!/usr/bin/env bash
# Puts the driver image of `make image` (an OCI archive, no registry) into
# every node of kind cluster $1 and names it $2 there, the name the chart and
# the demo use, so a rebuilt driver replaces the old one under that name.
#   KIND_PROVIDER       podman or docker (default: what hack/kind/provider.sh finds)
#   TRAINIUM_DRA_CACHE  cache root (default: ~/.cache/trainium-dra)
set -euo pipefail
shopt -s inherit_errexit

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../lib/retry.sh
. "$here/../lib/retry.sh"
root=$(cd "$here/../.." && pwd)
cluster=${1:?usage: load.sh CLUSTER IMAGE}
image=${2:?usage: load.sh CLUSTER IMAGE}
cache=${TRAINIUM_DRA_CACHE:-$HOME/.cache/trainium-dra}
provider=${KIND_PROVIDER:-$("$here/provider.sh")}

key=$(cd "$root" && python3 -m localsim.images driver-key)
archive="$cache/images/driver-$key.tar"
[ -f "$archive" ] || { echo "kind-load: no $archive for these sources: run make image" >&2; exit 1; }
# Up to four attempts each (hack/lib/retry.sh): once under make test's load a
# node's containerd refused the import ("failed to ingest index.json ...
# unexpected commit size"); it is taken for an error of the moment and the
# step made again.
retry "kind-load: loading $archive" "${KIND:-kind}" load image-archive "$archive" --name "$cluster"
for node in $("${KIND:-kind}" get nodes --name "$cluster"); do
  retry "kind-load: $node: naming the image $image" \
    "$provider" exec "$node" ctr -n k8s.io images tag --force "localhost/trainium-dra/driver:$key" "$image" >/dev/null
  echo "kind-load: $node: $image = localhost/trainium-dra/driver:$key" >&2
done
