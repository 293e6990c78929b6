#!/usr/bin/env bash
# Deletes kind cluster $1 and, once no kind cluster is left on this engine,
# the `kind` network that `kind create cluster` made (kind keeps it). On a
# loaded machine podman may give up on a node container whose processes do
# not die in its time ("given PIDs did not die within timeout"), and a second
# delete finds them gone: up to four attempts. Such a failed attempt may have
# removed some node containers but not their anonymous volumes (their /var),
# which the next attempt no longer sees: those are named before the delete and
# removed after it.
#   KIND_PROVIDER  podman or docker (default: what hack/kind/provider.sh finds)
set -euo pipefail
shopt -s inherit_errexit

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../lib/retry.sh
. "$here/../lib/retry.sh"
cluster=${1:?usage: down.sh CLUSTER}
provider=${KIND_PROVIDER:-$("$here/provider.sh")}

volumes=$("$provider" ps -a -q --filter "label=io.x-k8s.kind.cluster=$cluster" |
  xargs -r "$provider" inspect --format '{{range .Mounts}}{{if eq .Type "volume"}}{{.Name}}{{"\n"}}{{end}}{{end}}')
retry "kind-down: deleting $cluster" "${KIND:-kind}" delete cluster --name "$cluster"
for volume in $volumes; do
  if "$provider" volume inspect "$volume" >/dev/null 2>&1; then
    "$provider" volume rm "$volume" >/dev/null
    echo "kind-down: removed the volume $volume, which a failed attempt left" >&2
  fi
done
if [ -z "$("$provider" ps -a -q --filter label=io.x-k8s.kind.cluster)" ] &&
  "$provider" network inspect kind >/dev/null 2>&1; then
  "$provider" network rm kind >/dev/null
  echo "kind-down: removed the $provider network kind" >&2
fi
