#!/usr/bin/env bash
# Builds Kueue's manager (cmd/kueue) at the version go.mod here pins into
# <cache>/kueue-<version>/kueue, and copies the module's CRDs and webhook
# manifests beside it (<cache>/kueue-<version>/config/{crd,webhook}/), which
# `trainium-dra up --with-kueue` reads at run time; kept once built.
#   TRAINIUM_DRA_CACHE  cache root (default: ~/.cache/trainium-dra)
# Prints the directory on its last line.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../lib/build-manager.sh
. "$here/../lib/build-manager.sh"
build_manager "$here" kueue sigs.k8s.io/kueue cmd/kueue \
  config/components/crd config/components/webhook
