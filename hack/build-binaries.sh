#!/usr/bin/env bash
# Builds the upstream control-plane binaries from their Go modules into a
# cache outside the repo, keyed by version; binaries already there are kept.
#   K8S_VERSION   Kubernetes version (default: the one pinned in hack/k8s/go.mod);
#                 hack/k8s/build.sh builds it
#   ETCD_VERSION  etcd version (default: the one pinned in hack/etcd/go.mod)
# helm (hack/helm) and prometheus + promtool (hack/prometheus) are built at
# the versions their modules pin, named <tool>-<version> beside the others.
# The real-node runtime: kubelet and kube-proxy beside the control plane,
# containerd + ctr + shim (hack/containerd) in node/containerd-<version>/,
# the CNI plugins (hack/cni) in node/cni-<version>/ and the NetworkPolicy
# agent (hack/kube-network-policies/build.sh) in
# node/kube-network-policies-<version>/; runc and iptables come from Debian's
# packages (hack/node-packages.sh, for the targets that start real nodes).
# Kueue's manager and manifests (hack/kueue/build.sh) in kueue-<version>/.
# LeaderWorkerSet's manager and manifests (hack/lws/build.sh) in lws-<version>/.
#   BINARIES     control-plane: only what the local cluster of `make demo` runs
#                (etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
#                helm); promtool: only what the unit tests run (`make unit`);
#                all (the default): everything above
#   TRAINIUM_DRA_CACHE  cache root (default: ~/.cache/trainium-dra)
# Prints the directory holding the binaries on its last line.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
pinned() { go mod edit -json "$2" | python3 -c 'import json, sys; print(next(r["Version"] for r in json.load(sys.stdin)["Require"] if r["Path"] == sys.argv[1]))' "$1"; }
k8s_version=${K8S_VERSION:-$(pinned k8s.io/kubernetes "$here/k8s/go.mod")}
etcd_version=${ETCD_VERSION:-$(pinned go.etcd.io/etcd/server/v3 "$here/etcd/go.mod")}
cache=${TRAINIUM_DRA_CACHE:-$HOME/.cache/trainium-dra}
out="$cache/k8s/$k8s_version"
mkdir -p "$out"
# One build of a release at a time: `make test`'s lanes may ask for the same
# release at once; the second waits, then finds it built. Two releases build
# side by side, but what does not depend on the release (every tool below but
# Kubernetes) one builder at a time: the other waits, then links or keeps it.
exec 9>"$out/.build.lock"
flock 9
tools_lock="$cache/.tools.build.lock"

log() { echo "build-binaries: $*" >&2; }
# shellcheck source=lib/go-build.sh
. "$here/lib/go-build.sh"

# etcd, helm and prometheus do not depend on the Kubernetes version: one built
# beside another Kubernetes version is linked instead of built again.
reuse() {
  local bin=$1 other
  for other in "$cache"/k8s/*/"$(basename "$bin")"; do
    [ -x "$other" ] || continue
    ln -f "$other" "$bin" 2>/dev/null || cp "$other" "$bin"
    log "reusing $other"
    return 0
  done
  return 1
}

build_etcd() {
  local bin="$out/etcd-$etcd_version"
  [ -x "$bin" ] && return 0
  reuse "$bin" && return 0
  log "building etcd $etcd_version (first time only)"
  (
    cd "$here/etcd"
    if [ "$etcd_version" != "$(pinned go.etcd.io/etcd/server/v3 go.mod)" ]; then
      local dir
      dir=$(mktemp -d)
      cp go.mod go.sum main.go "$dir/"
      cd "$dir"
      go get "go.etcd.io/etcd/server/v3@$etcd_version" >&2
      go mod tidy >&2
    fi
    go_build . "$bin.tmp" "" .
  )
  mv "$bin.tmp" "$bin"
}

# Builds the commands $5... of the module in $1 in one `go build` with the
# extra ldflags $4, each into $2 as its name followed by $3.
build_commands() {
  local module=$1 dir=$2 suffix=$3 ldflags=$4 staging cmd
  shift 4
  staging=$(mktemp -d "$dir/.build.XXXXXX")
  go_build "$module" "$staging/" "$ldflags" "$@"
  for cmd in "$@"; do
    mv "$staging/$(basename "$cmd")" "$dir/$(basename "$cmd")$suffix"
  done
  rm -r "$staging"
}

# The `tool` commands of the module in hack/$1.
tools_of() {
  go mod edit -json "$here/$1/go.mod" | python3 -c 'import json, sys; print(" ".join(t["Path"] for t in json.load(sys.stdin)["Tool"]))'
}

# Builds each `tool` of the module in hack/$1 as <name>-<version of $2>, or
# only the one named by $4, in one `go build` (hack/lib/go-build.sh).
build_tools() {
  local module=$here/$1 version cmd missing=()
  version=$(pinned "$2" "$module/go.mod")
  for cmd in $(tools_of "$1"); do
    [ -z "${4:-}" ] || [ "$(basename "$cmd")" = "$4" ] || continue
    [ -x "$out/$(basename "$cmd")-$version" ] && continue
    reuse "$out/$(basename "$cmd")-$version" && continue
    missing+=("$cmd")
  done
  [ ${#missing[@]} -gt 0 ] || return 0
  log "building ${missing[*]##*/} $version (first time only)"
  build_commands "$module" "$out" "-$version" "$3" "${missing[@]}"
}

# Builds every `tool` of the module in hack/$1 under its plain name into
# node/$1-<version of $2>/ (containerd finds its shim by name on PATH), in one
# `go build`.
build_tool_dir() {
  local module=$here/$1 version dir cmd missing=()
  version=$(pinned "$2" "$module/go.mod")
  dir="$cache/node/$1-$version"
  mkdir -p "$dir"
  for cmd in $(tools_of "$1"); do
    [ -x "$dir/$(basename "$cmd")" ] || missing+=("$cmd")
  done
  [ ${#missing[@]} -gt 0 ] || return 0
  log "building ${missing[*]##*/} $version (first time only)"
  build_commands "$module" "$dir" "" "$3" "${missing[@]}"
}

# Prometheus and promtool (or only the tool $1 names); Prometheus 3.x.y is
# published as the Go module version v0.3xx.y. Of its service discoveries only
# Kubernetes' is built (the real-node cluster's scrape configuration uses it;
# the cloud ones would build every cloud's SDK).
build_prometheus() {
  local module release
  module=$(pinned github.com/prometheus/prometheus "$here/prometheus/go.mod")
  release=$(echo "$module" | sed -E 's/^v0\.3([0-9]{2})\.([0-9]+)$/3.\1.\2/; s/\.0([0-9])\./.\1./')
  GO_BUILD_TAGS=remove_all_sd,enable_kubernetes_sd build_tools prometheus \
    github.com/prometheus/prometheus "-X github.com/prometheus/common/version.Version=$release" "${1:-}"
}

if [ "${BINARIES:-all}" = promtool ]; then
  (
    flock 8
    build_prometheus promtool
  ) 8>"$tools_lock"
  echo "$out"
  exit 0
fi

k8s_commands="kube-apiserver kube-controller-manager kube-scheduler"
[ "${BINARIES:-all}" = control-plane ] || k8s_commands+=" kubelet kube-proxy"

# Kubernetes builds beside the rest, each a `go build` of its own: on two
# CPUs one build's links and last packages leave the other CPU to the other.
# A failure in the rest still waits for it, so nothing is left running.
K8S_VERSION=$k8s_version K8S_COMMANDS=$k8s_commands "$here/k8s/build.sh" "$out" &
k8s_build=$!
trap 'wait "$k8s_build" 2>/dev/null || true' EXIT
(
  flock 8
  build_etcd
  build_tools helm helm.sh/helm/v4 "-X helm.sh/helm/v4/internal/version.version=$(pinned helm.sh/helm/v4 "$here/helm/go.mod")"
  [ "${BINARIES:-all}" != control-plane ] || exit 0
  build_prometheus
  containerd_version=$(pinned github.com/containerd/containerd/v2 "$here/containerd/go.mod")
  build_tool_dir containerd github.com/containerd/containerd/v2 \
    "-X github.com/containerd/containerd/v2/version.Version=$containerd_version"
  build_tool_dir cni github.com/containernetworking/plugins ""
  "$here/kube-network-policies/build.sh"
  "$here/kueue/build.sh" > /dev/null
  "$here/lws/build.sh" > /dev/null
) 8>"$tools_lock"
wait "$k8s_build"
echo "$out"
