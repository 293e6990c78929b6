"""What every run of the scheduler benchmark shares: creating pods (and their
claims) and waiting until each is bound or refused, with the scheduler's own
CPU time, metrics and, on request, a CPU profile around them; publishing
slices on an empty pool."""

import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import yaml
from kubernetes import client

from benchmarks.scheduler_layouts import fleet_rack_name, node_labels, rack_nodes
from benchmarks.scheduler_profile import start_capture, summarize
from driver.jsontypes import JSON
from driver.kubeapi.apiserver import ApiServer
from driver.kubeapi.informer import Informer
from driver.kubeapi.resources import PODS, path_of
from driver.procstat import process_cpu_seconds
from localsim.controlplane.plane import ControlPlane
from testbed.controlplane import custom
from testbed.waiting import wait_for

NS = "bench"
CREATORS = 4
"""Threads creating claims and pods, so the client keeps ahead of the scheduler."""
ALGORITHM = "scheduler_scheduling_algorithm_duration_seconds"

Workload = Callable[[int], tuple[JSON | None, JSON]]
"""Claim (or None when the pod uses a template) and pod of item i."""


def scheduler_metrics(cp: ControlPlane) -> dict[str, float]:
    """Totals so far from the scheduler's own metrics: time in the scheduling
    algorithm and attempts, API requests it made, and the time those requests
    waited for its client's rate limiter (QPS/burst)."""
    text = httpx.get(
        f"https://127.0.0.1:{cp.config.ports.scheduler}/metrics",
        headers={"Authorization": f"Bearer {admin_token(cp)}"},
        verify=False,  # the scheduler's self-signed loopback serving cert
        timeout=10,
    ).text
    totals = {
        f"{ALGORITHM}_sum": "seconds",
        f"{ALGORITHM}_count": "attempts",
        "rest_client_requests_total": "requests",
        "rest_client_rate_limiter_duration_seconds_sum": "rate_limited_seconds",
    }
    out = dict.fromkeys(totals.values(), 0.0)
    for line in text.splitlines():
        name, _, value = line.rpartition(" ")
        key = totals.get(name.split("{", 1)[0])
        if key:
            out[key] += float(value)
    return out


def cpu_seconds(cp: ControlPlane, component: str) -> float:
    """CPU time a control-plane process has used so far (`driver.procstat`)."""
    pid = next(c.process.pid for c in cp.components if c.name == component)
    return process_cpu_seconds(pid)


def admin_token(cp: ControlPlane) -> str:
    token: str = yaml.safe_load(cp.kubeconfig.read_text())["users"][0]["user"]["token"]
    return token


class PodWatch:
    """Which pods of the namespace are bound or refused, from one informer:
    polling a LIST of 1,000 pods would cost the apiserver more CPU than the
    scheduler spends, on the same CPUs."""

    def __init__(self, cp: ControlPlane) -> None:
        self.bound: set[str] = set()
        self.refused: set[str] = set()
        self.last_change = time.perf_counter()
        self._lock = threading.Lock()
        with cp.api_client() as api:
            server = ApiServer(api.configuration, "trainium-dra-bench", 30.0)
        self._informer: Informer[JSON] = Informer(
            server,
            path_of(PODS, namespace=NS),
            {},
            dict,
            on_list=self._see_all,
            on_event=lambda _, pod: self._see(pod),
        )
        self._informer.start()

    def _see_all(self, pods: list[JSON]) -> None:
        for obj in pods:
            self._see(obj)

    def _see(self, obj: JSON) -> None:
        name = obj["metadata"]["name"]
        conditions = (obj.get("status") or {}).get("conditions") or []
        with self._lock:
            if obj["spec"].get("nodeName"):
                if name not in self.bound:
                    self.bound.add(name)
                    self.refused.discard(name)
                    self.last_change = time.perf_counter()
            elif name not in self.refused and any(
                c["type"] == "PodScheduled" and c.get("reason") == "Unschedulable"
                for c in conditions
            ):
                self.refused.add(name)
                self.last_change = time.perf_counter()

    def settled(self, count: int) -> tuple[int, int, float] | None:
        """(bound, refused, time of the last change) once all `count` pods are either."""
        with self._lock:
            if len(self.bound) + len(self.refused) < count:
                return None
            return len(self.bound), len(self.refused), self.last_change

    def close(self) -> None:
        self._informer.close()


@dataclass(frozen=True)
class ProfileRequest:
    """Profile the scheduler's first `seconds` of a run into `path`."""

    path: Path
    seconds: int


def run_pods(
    cp: ControlPlane,
    api: client.ApiClient,
    count: int,
    item: Workload,
    timeout: float,
    *,
    profile: ProfileRequest | None = None,
) -> dict[str, Any]:
    """Create `count` claims and pods; wait until every pod is bound or refused.

    Each creating thread has a client of its own: connections of one client
    shared by the threads were left broken (SSL errors on its next use)."""
    local = threading.local()

    def create(i: int) -> None:
        if not hasattr(local, "api"):
            local.api = client.ApiClient(api.configuration)
        claim, spec = item(i)
        if claim is not None:
            custom(local.api).create_namespaced_custom_object(
                "resource.k8s.io", "v1", NS, "resourceclaims", claim
            )
        client.CoreV1Api(local.api).create_namespaced_pod(NS, spec)

    watch = PodWatch(cp)
    try:
        before = scheduler_metrics(cp)
        cpu_before = cpu_seconds(cp, "kube-scheduler")
        capture = (
            start_capture(
                f"https://127.0.0.1:{cp.config.ports.scheduler}",
                admin_token(cp),
                profile.seconds,
                profile.path,
            )
            if profile
            else None
        )
        t0 = time.perf_counter()
        with ThreadPoolExecutor(CREATORS) as pool:
            list(pool.map(create, range(count)))
        created = time.perf_counter() - t0
        bound, refused, done = wait_for("pods settled", lambda: watch.settled(count), timeout, 0.2)
    finally:
        watch.close()
    seconds = done - t0
    after = scheduler_metrics(cp)
    algorithm = after["seconds"] - before["seconds"]
    cpu = cpu_seconds(cp, "kube-scheduler") - cpu_before
    profiled = {}
    if capture is not None:
        capture.join()
        profiled = {"profile": summarize(capture.path), "profile_seconds": capture.seconds}
    return {
        **profiled,
        "pods": count,
        "bound": bound,
        "refused": refused,
        "seconds": round(seconds, 2),
        "create_seconds": round(created, 2),
        "ms_per_pod": round(1000 * seconds / count, 1),
        "pods_per_second": round(bound / seconds, 1),
        "algorithm_ms_per_pod": round(1000 * algorithm / count, 2),
        "scheduler_cpu_ms_per_pod": round(1000 * cpu / count, 2),
        "attempts": int(after["attempts"] - before["attempts"]),
        "api_requests_per_pod": round((after["requests"] - before["requests"]) / count, 2),
        "rate_limited_seconds": round(
            after["rate_limited_seconds"] - before["rate_limited_seconds"], 1
        ),
    }


def gone_already(delete: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
    """Delete, taking "not found" as done."""
    try:
        delete(*args, **kwargs)
    except client.ApiException as err:
        if err.status != 404:
            raise


def nothing_left(api: client.ApiClient, plural: str) -> bool:
    found = custom(api).list_cluster_custom_object("resource.k8s.io", "v1", plural, limit=1)
    return not found["items"]


def publish(api: client.ApiClient, slices: Sequence[JSON]) -> None:
    """Create the slices on an empty pool (`clear` waited for it). A create the
    client sent again after a broken connection finds its own slice: 409 is done."""
    for s in slices:
        try:
            custom(api).create_cluster_custom_object("resource.k8s.io", "v1", "resourceslices", s)
        except client.ApiException as err:
            if err.status != 409:
                raise
    time.sleep(2)  # the scheduler's informer catches up


def ensure_fleet_nodes(cp: ControlPlane, api: client.ApiClient, racks: int) -> None:
    """The nodes of `racks` racks, labelled as the local cluster's, those missing created."""
    existing = {n.metadata.name for n in client.CoreV1Api(api).list_node().items}
    for rack in range(racks):
        for server, node in enumerate(rack_nodes(rack)):
            if node not in existing:
                cp.create_node(node, node_labels(fleet_rack_name(rack), server))
