#!/usr/bin/env bash
# Puts a controller manager built here (a static Go binary) on every node of
# kind cluster $1 as image localhost/trainium-dra/$2:$4: the binary $3 alone,
# as /manager, in a one-layer image that runs as a non-root user, as the
# managers' charts ask (runAsNonRoot). The image is kept as an OCI archive in
# the cache (made once by hack/images/oci_archive.py, no registry and no
# container tool) and loaded with `kind load image-archive`, so it is never
# pulled. Run by hack/kind/kueue.sh and hack/kind/lws.sh.
#   TRAINIUM_DRA_CACHE  cache root (default: ~/.cache/trainium-dra)
set -euo pipefail
shopt -s inherit_errexit

root=$(cd "$(dirname "$0")/../.." && pwd)
usage="usage: manager-image.sh CLUSTER NAME BINARY VERSION"
cluster=${1:?$usage}
name=${2:?$usage}
binary=${3:?$usage}
version=${4:?$usage}
cache=${TRAINIUM_DRA_CACHE:-$HOME/.cache/trainium-dra}
ref=localhost/trainium-dra/$name:$version
archive="$cache/images/$name-$version.tar"

if [ ! -f "$archive" ]; then
  echo "kind-$name: image $ref from $binary" >&2
  mkdir -p "$(dirname "$archive")"
  # 65532: the unprivileged user of the images upstream publishes.
  python3 "$root/hack/images/oci_archive.py" --out "$archive.partial" --ref "$ref" \
    --file "$binary:/manager:0755" --entrypoint '["/manager"]' --user 65532:65532 >/dev/null
  mv "$archive.partial" "$archive"
fi
"${KIND:-kind}" load image-archive "$archive" --name "$cluster"
