#!/usr/bin/env bash
# Names the container engine kind uses here: docker when its daemon answers,
# else podman (kind's KIND_EXPERIMENTAL_PROVIDER=podman), installed from
# Debian's packages when missing (with runc, which podman then uses rather
# than crun, and netavark with aardvark-dns, whose DNS lets the workers find
# the control-plane node by name). A docker client without a daemon does not
# count.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../lib/debian-packages.sh
. "$here/../lib/debian-packages.sh"
if command -v docker >/dev/null && docker info >/dev/null 2>&1; then
  echo docker
else
  install_missing "kind (no docker daemon answers)" runc podman \
    /usr/lib/podman/netavark:netavark /usr/lib/podman/aardvark-dns:aardvark-dns ||
    { echo "kind needs docker (with its daemon running) or podman" >&2; exit 1; }
  echo podman
fi
