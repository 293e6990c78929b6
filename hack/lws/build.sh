#!/usr/bin/env bash
# Builds LeaderWorkerSet's manager (the module's cmd/ package) at the version
# go.mod here pins into <cache>/lws-<version>/lws, and copies the module's CRD
# and webhook manifests beside it (<cache>/lws-<version>/config/{crd,webhook}/),
# which `trainium-dra up --with-lws` reads at run time; kept once built.
#   TRAINIUM_DRA_CACHE  cache root (default: ~/.cache/trainium-dra)
# Prints the directory on its last line.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../lib/build-manager.sh
. "$here/../lib/build-manager.sh"
build_manager "$here" lws sigs.k8s.io/lws cmd config/crd config/webhook
