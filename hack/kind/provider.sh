#!/usr/bin/env bash
# Names the container engine kind uses here: docker when its daemon answers,
# else podman (kind's KIND_EXPERIMENTAL_PROVIDER=podman). A docker client
# without a daemon does not count.
set -euo pipefail
if command -v docker >/dev/null && docker info >/dev/null 2>&1; then
  echo docker
elif command -v podman >/dev/null; then
  echo podman
else
  echo "kind needs docker (with its daemon running) or podman; install one, e.g. apt-get install podman" >&2
  exit 1
fi
