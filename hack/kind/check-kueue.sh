#!/usr/bin/env bash
# Checks deploy/examples/kind-kueue on kind cluster $1, where `make
# kind-kueue` installed Kueue: a Job admitted and Running on a chip, a second
# one queued behind the queue's one-chip quota with Kueue's reason, then
# admitted and Running once the first is deleted. Removes the example after.
# Run by hack/kind/e2e.sh.
set -euo pipefail
shopt -s inherit_errexit

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
# shellcheck source=../lib/webhooks.sh
. "$here/../lib/webhooks.sh"
cluster=${1:?usage: check-kueue.sh CLUSTER}
kubectl=("${KUBECTL:-kubectl}" --context "kind-$cluster")
example="$root/deploy/examples/kind-kueue"
ns=(-n kind-kueue)
fail() { echo "kind-e2e: FAILED: $*" >&2; exit 1; }

# The Workload Kueue made for Job $1.
workload() {
  "${kubectl[@]}" "${ns[@]}" get workloads.kueue.x-k8s.io -o \
    jsonpath="{range .items[?(@.metadata.ownerReferences[0].name==\"$1\")]}{.metadata.name}{end}"
}
# Polls until Job $1 has a Running pod. The Job controller makes the pod only
# after Kueue unsuspends the Job, so right after admission the selector can
# match nothing yet, and `kubectl wait -l` fails at once on an empty match.
pod_running() {
  local phases _
  for _ in {1..180}; do
    phases=$("${kubectl[@]}" "${ns[@]}" get pods -l "job-name=$1" -o jsonpath='{.items[*].status.phase}')
    grep -qw Running <<<"$phases" && return 0
    sleep 1
  done
  fail "Job $1 admitted, but its pod is not Running (pod phases: ${phases:-no pod yet})"
}
# Waits for Job $1's Workload to exist and be admitted, then for its pod to run.
running() {
  local name="" _
  for _ in {1..60}; do
    name=$(workload "$1")
    [ -n "$name" ] && break
    sleep 1
  done
  [ -n "$name" ] || fail "Kueue made no Workload for Job $1"
  "${kubectl[@]}" "${ns[@]}" wait "workloads.kueue.x-k8s.io/$name" --for=condition=Admitted --timeout=300s >/dev/null ||
    fail "Job $1 not admitted: $("${kubectl[@]}" "${ns[@]}" get "workloads.kueue.x-k8s.io/$name" -o jsonpath='{.status.conditions}')"
  pod_running "$1"
}

# queue.yaml creates the namespace first.yaml's Job goes to; Kueue's webhooks
# look namespaces up in a cache that can lag that creation.
while_webhooks_refuse 300 'denied the request: Namespace "[^"]+" not found' \
  "${kubectl[@]}" apply -f "$example/queue.yaml" -f "$example/first.yaml" >/dev/null ||
  fail "Kueue refused the example's queue or Job"
running first
"${kubectl[@]}" apply -f "$example/second.yaml" >/dev/null
for _ in {1..60}; do
  queued=$(workload second)
  [ -n "$queued" ] && break
  sleep 1
done
[ -n "$queued" ] || fail "Kueue made no Workload for Job second"
"${kubectl[@]}" "${ns[@]}" wait "workloads.kueue.x-k8s.io/$queued" --for=condition=QuotaReserved=false --timeout=240s >/dev/null ||
  fail "Job second is not held back by the one-chip quota"
message=$("${kubectl[@]}" "${ns[@]}" get "workloads.kueue.x-k8s.io/$queued" -o \
  jsonpath='{.status.conditions[?(@.type=="QuotaReserved")].message}')
grep -qF "insufficient unused quota for aws.amazon.com/neuron" <<<"$message" ||
  fail "Job second waits for another reason: $message"
[ "$("${kubectl[@]}" "${ns[@]}" get job second -o jsonpath='{.spec.suspend}')" = true ] ||
  fail "Job second is queued but not suspended"
"${kubectl[@]}" "${ns[@]}" delete job first --cascade=foreground --wait=true >/dev/null
running second
echo "kind-e2e: Kueue: first admitted and Running, second queued ($message), then admitted and Running" >&2
"${kubectl[@]}" delete -f "$example/second.yaml" -f "$example/queue.yaml" --wait=true >/dev/null
