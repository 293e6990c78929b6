"""From an injected uncorrectable error to the device taint in the slice and
to the pod's eviction, timed over repeated trials on a running cluster."""

import statistics
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kubernetes import client, watch

from driver.names import DEFAULT_DRIVER_NAME
from testbed.chaos.faults import set_fault
from testbed.chaos.localrack import ChaosCluster
from testbed.chaos.workload import create_many, delete_all, wait_running
from testbed.waiting import wait_for

NAMESPACE = "chaos-react"
TAINT_KEY = f"{DEFAULT_DRIVER_NAME}/unhealthy"
SLICES_OF_DRIVER = f"spec.driver={DEFAULT_DRIVER_NAME}"
TRIAL_TIMEOUT = 120.0


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


def has_taint(slice_obj: Mapping[str, Any]) -> bool:
    return any(
        t["key"] == TAINT_KEY
        for d in slice_obj["spec"].get("devices") or []
        for t in d.get("taints") or []
    )


def tainted(api: client.ApiClient) -> bool:
    """Any device of the driver tainted unhealthy (one fault is injected at a time)."""
    return any(has_taint(s) for s in driver_slices(api)["items"])


def driver_slices(api: client.ApiClient, **extra: Any) -> dict[str, Any]:
    found: dict[str, Any] = client.CustomObjectsApi(api).list_cluster_custom_object(
        "resource.k8s.io", "v1", "resourceslices", field_selector=SLICES_OF_DRIVER, **extra
    )
    return found


def gone(event: Mapping[str, Any]) -> bool:
    pod = event["object"]
    return bool(event["type"] == "DELETED" or pod["metadata"].get("deletionTimestamp"))


class FirstEvent:
    """Watches from `resource_version` in a thread and keeps the monotonic time
    of the first event `match` accepts: a watch sees the change as the
    apiserver commits it, where polling a list adds the list's own cost."""

    def __init__(
        self,
        list_call: Callable[..., Any],
        resource_version: str,
        match: Callable[[Mapping[str, Any]], bool],
        **selectors: Any,
    ) -> None:
        self.at = 0.0
        self._watch = watch.Watch(return_type="object")
        self._args = (list_call, resource_version, match, selectors)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        list_call, resource_version, match, selectors = self._args
        for event in self._watch.stream(
            list_call,
            resource_version=resource_version,
            timeout_seconds=int(TRIAL_TIMEOUT),
            **selectors,
        ):
            if match(event):
                self.at = time.monotonic()
                self._watch.stop()

    def wait(self) -> float:
        self._thread.join(TRIAL_TIMEOUT + 10)
        self._watch.stop()
        return self.at


def trial(cluster: ChaosCluster, index: int) -> Trial:
    api = cluster.api
    name = f"t{index}"
    create_many(api, NAMESPACE, [name], "chip")
    wait_running(api, NAMESPACE, [name])
    uid = client.ResourceV1Api(api).read_namespaced_resource_claim(name, NAMESPACE).metadata.uid
    node, chip = chip_of(cluster, uid)
    custom = client.CustomObjectsApi(api)
    core = client.CoreV1Api(api)
    slices_at = driver_slices(api, limit=1)["metadata"]["resourceVersion"]
    pods_at = core.list_namespaced_pod(NAMESPACE, limit=1).metadata.resource_version
    taint = FirstEvent(
        custom.list_cluster_custom_object,
        slices_at,
        lambda e: has_taint(e["object"]),
        group="resource.k8s.io",
        version="v1",
        plural="resourceslices",
        field_selector=SLICES_OF_DRIVER,
    )
    eviction = FirstEvent(
        core.list_namespaced_pod,
        pods_at,
        gone,
        namespace=NAMESPACE,
        field_selector=f"metadata.name={name}",
    )
    fault = {"node": node, "chip": chip, "kind": "ecc-uncorrected-hbm"}
    started = time.monotonic()
    set_fault(cluster.sim_control(), fault)
    taint_at, eviction_at = taint.wait(), eviction.wait()
    if not (taint_at and eviction_at):
        raise AssertionError(
            f"trial {index}: after {TRIAL_TIMEOUT:.0f} s, taint seen: {bool(taint_at)}, "
            f"eviction seen: {bool(eviction_at)}"
        )
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
