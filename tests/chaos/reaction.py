"""From an injected uncorrectable error to the device taint in the slice and
to the pod's eviction, timed over repeated trials on a running cluster."""

import statistics
import time
from dataclasses import dataclass
from typing import Any

from kubernetes import client

from driver.names import DEFAULT_DRIVER_NAME
from tests.chaos.faults import set_fault
from tests.chaos.localrack import ChaosCluster
from tests.chaos.workload import create_many, delete_all, wait_running
from tests.waiting import wait_for

NAMESPACE = "chaos-react"
TAINT_KEY = f"{DEFAULT_DRIVER_NAME}/unhealthy"
POLL = 0.05


@dataclass(frozen=True)
class Trial:
    taint_seconds: float
    eviction_seconds: float


def chip_of(cluster: ChaosCluster, claim_uid: str) -> tuple[str, int]:
    """The node and local chip index the daemon prepared the claim on."""
    for node, claims in cluster.checkpoints().items():
        record = claims.get(claim_uid)
        if record is not None:
            return node, record.devices[0].ranges[0][0]
    raise AssertionError(f"claim {claim_uid} is in no checkpoint")


def tainted(api: client.ApiClient) -> bool:
    """Any device of the driver tainted unhealthy (one fault is injected at a time)."""
    items = client.CustomObjectsApi(api).list_cluster_custom_object(
        "resource.k8s.io",
        "v1",
        "resourceslices",
        field_selector=f"spec.driver={DEFAULT_DRIVER_NAME}",
    )["items"]
    return any(
        t["key"] == TAINT_KEY
        for s in items
        for d in s["spec"].get("devices") or []
        for t in d.get("taints") or []
    )


def evicted(api: client.ApiClient, name: str) -> bool:
    try:
        pod = client.CoreV1Api(api).read_namespaced_pod(name, NAMESPACE)
    except client.ApiException as err:
        return bool(err.status == 404)
    return pod.metadata.deletion_timestamp is not None


def trial(cluster: ChaosCluster, index: int) -> Trial:
    api = cluster.api
    name = f"t{index}"
    create_many(api, NAMESPACE, [name], "chip")
    wait_running(api, NAMESPACE, [name])
    uid = client.ResourceV1Api(api).read_namespaced_resource_claim(name, NAMESPACE).metadata.uid
    node, chip = chip_of(cluster, uid)
    fault = {"node": node, "chip": chip, "kind": "ecc-uncorrected-hbm"}
    started = time.monotonic()
    set_fault(cluster.sim_control(), fault)
    taint_at = eviction_at = 0.0
    while not (taint_at and eviction_at):
        now = time.monotonic()
        if now - started > 120:
            raise AssertionError(
                f"trial {index}: after 120 s, taint at {taint_at}, eviction at {eviction_at}"
            )
        if not taint_at and tainted(api):
            taint_at = now
        if not eviction_at and evicted(api, name):
            eviction_at = now
        time.sleep(POLL)
    set_fault(cluster.sim_control(), fault, inject=False)
    wait_for("the taint lifted", lambda: not tainted(api), 120, interval=0.2)
    delete_all(api, NAMESPACE)
    return Trial(taint_at - started, eviction_at - started)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def reaction_times(cluster: ChaosCluster, trials: int) -> dict[str, Any]:
    done = [trial(cluster, i) for i in range(trials)]
    taint = [t.taint_seconds for t in done]
    evict = [t.eviction_seconds for t in done]
    return {
        "trials": trials,
        "taint_p50_s": round(statistics.median(taint), 2),
        "taint_p99_s": round(percentile(taint, 0.99), 2),
        "eviction_p50_s": round(statistics.median(evict), 2),
        "eviction_p99_s": round(percentile(evict, 0.99), 2),
        "taint_goal_s": 5.0,
        "eviction_goal_s": 10.0,
    }
