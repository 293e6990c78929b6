"""Reading Kueue's objects on a cluster running Kueue (`up --with-kueue`, or
kind after `make kind-kueue`): Workloads by the Job or pod they stand for,
their conditions, ClusterQueue status, the device claim of a pod Kueue let
through, and the waits the Kueue checks share."""

import time

from kubernetes import client

from driver.jsontypes import JSON
from localsim.kueue.queues import API_VERSION
from testbed.localcluster import Cluster, wait_for

GROUP, VERSION = API_VERSION.split("/")
QUIET = 5.0
"""How long a Workload must stay unadmitted to count as held back."""


def workloads(cluster: Cluster, namespace: str) -> dict[str, JSON]:
    """Owner name (the Job's, or the plain pod's) -> its Workload."""
    listed = client.CustomObjectsApi(cluster.api).list_namespaced_custom_object(
        GROUP, VERSION, namespace, "workloads"
    )
    return {
        owner["name"]: item
        for item in listed["items"]
        for owner in item["metadata"].get("ownerReferences") or []
    }


def condition(workload: JSON, kind: str) -> JSON | None:
    found: JSON | None = next(
        (c for c in workload.get("status", {}).get("conditions") or [] if c["type"] == kind), None
    )
    return found


def is_true(workload: JSON, kind: str) -> bool:
    found = condition(workload, kind)
    return found is not None and found["status"] == "True"


def admitted(cluster: Cluster, namespace: str) -> set[str]:
    return {name for name, w in workloads(cluster, namespace).items() if is_true(w, "Admitted")}


def cluster_queue(cluster: Cluster, name: str) -> JSON:
    found: JSON = client.CustomObjectsApi(cluster.api).get_cluster_custom_object(
        GROUP, VERSION, "clusterqueues", name
    )
    return found


def pods_of_job(cluster: Cluster, namespace: str, job: str) -> list[JSON]:
    items = (
        client.CoreV1Api(cluster.api)
        .list_namespaced_pod(namespace, label_selector=f"job-name={job}")
        .items
    )
    return [cluster.api.sanitize_for_serialization(p) for p in items]


def device_claim(cluster: Cluster, pod: JSON) -> JSON:
    """The pod's claim: from its template, or the one the scheduler made for
    its extended resource requests."""
    extended = (pod["status"].get("extendedResourceClaimStatus") or {}).get("resourceClaimName")
    if pod["spec"].get("resourceClaims") or not extended:
        return cluster.claim_of(pod)
    found = client.ResourceV1Api(cluster.api).read_namespaced_resource_claim(
        extended, pod["metadata"]["namespace"]
    )
    claim: JSON = cluster.api.sanitize_for_serialization(found)
    return claim


RUNNING_TIMEOUT = 180.0
AFTER_PREEMPTION_TIMEOUT = 330.0
"""A pod the scheduler found no room for while preempted pods' claims still
held their devices is tried again when the claims' release reaches it; should
the scheduler miss that update, the pod waits for the unschedulable queue's
flush (five minutes). Seen once under `make test`'s load (one pod of 36,
still unschedulable 180 s after the preemption); this covers one flush."""


def running_pods(
    cluster: Cluster, namespace: str, job: str, count: int, timeout: float = RUNNING_TIMEOUT
) -> list[JSON]:
    def probe() -> list[JSON] | None:
        pods = [
            p for p in pods_of_job(cluster, namespace, job) if p["status"].get("phase") == "Running"
        ]
        return pods if len(pods) == count else None

    try:
        return wait_for(f"{count} pods of {namespace}/{job} Running", probe, timeout=timeout)
    except AssertionError as err:
        raise AssertionError(f"{err}\n{cluster.job_story(namespace, job)}") from None


def held_back(cluster: Cluster, namespace: str, name: str) -> None:
    """The Workload stays without quota for QUIET seconds."""
    deadline = time.monotonic() + QUIET
    while time.monotonic() < deadline:
        workload = workloads(cluster, namespace)[name]
        assert not is_true(workload, "QuotaReserved"), workload["status"]
        time.sleep(0.5)


def pending_reason(cluster: Cluster, namespace: str, name: str) -> JSON:
    def probe() -> JSON | None:
        workload = workloads(cluster, namespace).get(name)
        found = condition(workload, "QuotaReserved") if workload else None
        return found if found and found["status"] == "False" and found.get("message") else None

    return wait_for(f"{namespace}/{name} pending with a reason", probe)
