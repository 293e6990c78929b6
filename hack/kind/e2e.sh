#!/usr/bin/env bash
# Runs docs/kind.md on this machine, as its make targets, and checks what the
# page promises: the node image, the four-node cluster, the driver image on
# the nodes, the chart installed by helm (a node daemon on every node, the
# rack's servers 0 to 3 mapped to the nodes), the demo claim allocated and
# prepared by the node daemon under a worker's kubelet (its pod prints the
# environment the CDI spec gave it and runs a job through the daemon's
# workload API), pods on the workers reaching each other over the pod
# network, Kueue from its chart queueing and admitting Jobs
# (hack/kind/check-kueue.sh) and the Kueue examples (tests/kind), then the
# chart switched to the AWS profile, LeaderWorkerSet from its chart and AWS's
# UltraServer LeaderWorkerSets on the UltraServer's pairs and quad
# (tests/kind/test_lws_examples.py), then `make kind-down` leaving no
# container, volume or network behind. The cluster is deleted on failure too;
# exits non-zero on any failure. Prints how long each step took. Run by `make
# kind-e2e` (which sets the environment).
#   KIND_CLUSTER  the cluster's name (default: trainium-dra)
set -euo pipefail
shopt -s inherit_errexit

root=$(cd "$(dirname "$0")/../.." && pwd)
cluster=${KIND_CLUSTER:-trainium-dra}
provider=${KIND_PROVIDER:?run through make kind-e2e}
kubectl=("${KUBECTL:-kubectl}" --context "kind-$cluster")
namespace=kind-demo
log() { echo "kind-e2e: $*" >&2; }
fail() { log "FAILED: $*"; exit 1; }

timings=()
step() {
  local started=$SECONDS
  log "make $1"
  make -C "$root" --no-print-directory "$1" KIND_CLUSTER="$cluster"
  timings+=("$1 $((SECONDS - started))")
}

if "$provider" ps -a -q --filter "label=io.x-k8s.kind.cluster=$cluster" | grep -q .; then
  fail "a kind cluster named $cluster exists; delete it (make kind-down) or set KIND_CLUSTER"
fi
volumes_before=$("$provider" volume ls -q | sort)
network_before=$("$provider" network inspect kind >/dev/null 2>&1 && echo yes || echo no)

deleted=no
kubeconfig=""
on_exit() {
  local rc=$?
  [ -z "$kubeconfig" ] || rm -f "$kubeconfig"
  if [ "$deleted" = no ]; then
    if [ $rc -ne 0 ]; then
      log "state before deleting the cluster:"
      "${kubectl[@]}" get pods -A -o wide >&2 || true
      "${kubectl[@]}" -n "$namespace" describe pods >&2 || true
      "${kubectl[@]}" -n trainium-dra logs ds/trainium-dra-node --tail 50 >&2 || true
      "${kubectl[@]}" -n kueue-system logs deploy/kueue-controller-manager --tail 50 >&2 || true
      "${kubectl[@]}" get workloads.kueue.x-k8s.io -A >&2 || true
      "${kubectl[@]}" -n lws-system logs deploy/lws-controller-manager --tail 50 >&2 || true
      # Why a manager restarted: probe failures, kills, back-offs.
      "${kubectl[@]}" get events -A --field-selector type=Warning --sort-by=.lastTimestamp >&2 || true
    fi
    make -C "$root" --no-print-directory kind-down KIND_CLUSTER="$cluster" || true
  fi
  exit $rc
}
trap on_exit EXIT

total=$SECONDS
step kind-node-image
step kind-up
# deploy/kind/cluster.yaml's patch reached kubeadm: neither component can
# give up a Lease and restart under load.
for component in kube-scheduler kube-controller-manager; do
  args=$("${kubectl[@]}" -n kube-system get pod "$component-$cluster-control-plane" -o jsonpath='{.spec.containers[0].command}')
  grep -qF -- '--leader-elect=false' <<<"$args" || fail "$component runs with leader election: $args"
done
step kind-load
step kind-install
step kind-demo

started=$SECONDS
"${kubectl[@]}" -n "$namespace" wait pod/gemm --for=jsonpath='{.status.phase}'=Succeeded --timeout=5m
out=$("${kubectl[@]}" -n "$namespace" logs gemm)
echo "$out"
node=$("${kubectl[@]}" -n "$namespace" get pod gemm -o jsonpath='{.spec.nodeName}')
[ "${node#"$cluster"-worker}" != "$node" ] || fail "the demo pod ran on $node, not on a worker"
index=$("${kubectl[@]}" get node "$node" -o jsonpath='{.metadata.labels.trainium\.sim\.dev/server-index}')
daemon=$("${kubectl[@]}" -n trainium-dra get pods -l app.kubernetes.io/component=node \
  --field-selector "spec.nodeName=$node" -o jsonpath='{.items[*].status.containerStatuses[0].ready}')
[ "$daemon" = true ] || fail "no ready node daemon on $node (got '$daemon')"
# Only the node daemon's CDI spec sets these; the job ran on the claim's token.
for want in "TRAINIUM_DRA_NODE=$node" "TRAINIUM_DRA_ULTRASERVER=kind-rack" "TRAINIUM_DRA_SERVER_INDEX=$index" \
  "TRAINIUM_DRA_WORKLOAD_SOCKET=" "TRAINIUM_DRA_TOKEN_FILE=" "NEURON_RT_VISIBLE_CORES=" '"state": "succeeded"'; do
  grep -qF "$want" <<<"$out" || fail "the demo pod's log lacks $want"
done
grep -qE '^TRAINIUM_DRA_CLAIM_UID=[0-9a-f-]{36}$' <<<"$out" || fail "the demo pod's log lacks TRAINIUM_DRA_CLAIM_UID"
grep -qE '^NEURON_RT_VISIBLE_CORES=([0-9]+,){7}[0-9]+$' <<<"$out" || fail "the demo pod did not get the 8 cores of a chip"
timings+=("demo-pod $((SECONDS - started))")

started=$SECONDS
"$root/hack/kind/check-rack.sh" "$cluster"
"$root/hack/kind/check-pod-network.sh" "$cluster"
timings+=("checks $((SECONDS - started))")

# The demo's and the checks' pods stayed off the control plane; the Kueue
# examples' whole-rack jobs need a pod on each of the rack's four servers.
"${kubectl[@]}" taint nodes "$cluster-control-plane" node-role.kubernetes.io/control-plane:NoSchedule-
step kind-kueue
started=$SECONDS
"$root/hack/kind/check-kueue.sh" "$cluster"
timings+=("kueue-example $((SECONDS - started))")

kubeconfig=$(mktemp)
"${KIND:-kind}" get kubeconfig --name "$cluster" >"$kubeconfig"
# tests/kind/<module> against the cluster, timed as $2.
examples() {
  local started=$SECONDS
  TRAINIUM_DRA_KIND_KUBECONFIG=$kubeconfig "$root/.venv/bin/python" -m pytest -q -p no:cacheprovider \
    --rootdir "$root" "$root/tests/kind/$1"
  timings+=("$2 $((SECONDS - started))")
}
examples test_kueue_examples.py kueue-examples

# The same cluster in AWS's vocabulary, and AWS's LeaderWorkerSets on it.
step kind-aws
step kind-lws
examples test_lws_examples.py lws-examples

started=$SECONDS
make -C "$root" --no-print-directory kind-down KIND_CLUSTER="$cluster"
deleted=yes
timings+=("kind-down $((SECONDS - started))")
left=$("$provider" ps -a -q --filter "label=io.x-k8s.kind.cluster=$cluster")
[ -z "$left" ] || fail "containers left behind: $left"
new_volumes=$(comm -13 <(echo "$volumes_before") <("$provider" volume ls -q | sort))
[ -z "$new_volumes" ] || fail "volumes left behind: $new_volumes"
if [ "$network_before" = no ] && "$provider" network inspect kind >/dev/null 2>&1; then
  fail "the kind network was left behind"
fi

log "passed on $provider; seconds per step:"
for t in "${timings[@]}"; do
  printf '  %-16s %5ss\n' "${t% *}" "${t#* }" >&2
done
log "total $((SECONDS - total))s"
