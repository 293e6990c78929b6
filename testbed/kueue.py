"""Reading Kueue's objects on a local cluster started with `--with-kueue`:
Workloads by the Job or pod they stand for, their conditions, ClusterQueue
status, and the device claim of a pod Kueue let through."""

from kubernetes import client

from driver.jsontypes import JSON
from driver.localsim.kueue.queues import API_VERSION
from testbed.localcluster import Cluster

GROUP, VERSION = API_VERSION.split("/")


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
