"""Faults of the platform under a rack with claims prepared and pods running:
the apiserver or etcd killed and restarted, the controller killed while it
publishes ten racks with a second replica waiting, a Node deleted and
re-created, and the node daemon killed during ten concurrent prepares.

Each run returns how long the cluster took to converge and the audit counts
(all must be 0). Converged means: a new claim is allocated and prepared and
its pod runs, and the rack's slices list again exactly the devices they
listed before the fault.
"""

import socket
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from typing import Any

from kubernetes import client

from driver.devicemodel.layout import planned_devices
from driver.names import API_GROUP, API_VERSION, DEFAULT_DRIVER_NAME, rack_label
from localsim.clusterspec import node_labels
from localsim.controlplane.children import Child
from localsim.controlplane.plane import free_port
from simdevice.topology import rack_spec
from testbed.chaos import audit
from testbed.chaos.localrack import ChaosCluster
from testbed.chaos.workload import (
    create_many,
    delete_all,
    live_claims,
    pods,
    running,
    wait_running,
)
from testbed.waiting import wait_for

NAMESPACE = "chaos"
PROBES = "chaos-probe"


@dataclass(frozen=True)
class FaultRun:
    fault: str
    converge_seconds: float
    audit: audit.Audit
    detail: str

    def to_json(self) -> dict[str, Any]:
        return {
            "fault": self.fault,
            "converge_seconds": round(self.converge_seconds, 2),
            **asdict(self.audit),
            "detail": self.detail,
        }


def api_answers(api: client.ApiClient) -> bool:
    try:
        client.CoreV1Api(api).list_namespace(limit=1, _request_timeout=3)
    except Exception:
        return False
    return True


class Scene:
    """A rack with `pods` chip pods Running; the baseline every fault is audited against."""

    def __init__(self, cluster: ChaosCluster, pods: int) -> None:
        self.cluster = cluster
        self.api = cluster.api
        names = [f"w{i}" for i in range(pods)]
        create_many(self.api, NAMESPACE, names, "chip")
        self.pods = wait_running(self.api, NAMESPACE, names)
        self.devices = audit.slice_devices(self.api)
        self.probes = 0

    def converged(self, started: float) -> float:
        """Seconds from `started` until a new pod runs and the slices are whole again."""
        wait_for("the apiserver", lambda: api_answers(self.api), 180, interval=0.2)
        self.probes += 1
        name = f"probe-{self.probes}"
        create_many(self.api, PROBES, [name], "core")
        wait_running(self.api, PROBES, [name], timeout=300)
        wait_for(
            "the slices as before the fault",
            self._slices_whole,
            300,
            interval=0.2,
        )
        return time.monotonic() - started

    def _slices_whole(self) -> bool:
        now = audit.slice_devices(self.api)
        return audit.count_lost(self.devices, now) == 0 and audit.count_duplicated(now) == 0

    def clear(self) -> None:
        """Remove the scene's pods and claims; the rack is free again."""
        for namespace in (NAMESPACE, PROBES):
            delete_all(self.api, namespace)

    def audit(self) -> audit.Audit:
        now = audit.slice_devices(self.api)
        checkpoints = self.cluster.checkpoints()
        live = set(live_claims(self.api))
        return audit.Audit(
            duplicated_devices=audit.count_duplicated(now),
            lost_devices=audit.count_lost(self.devices, now),
            claims_prepared_twice=audit.count_prepared_twice(checkpoints),
            leaked_cores=audit.count_leaked_cores(checkpoints, live),
            pods_wrongly_evicted=audit.count_evicted(self.pods, running(self.api, NAMESPACE)),
        )


def restart_component(scene: Scene, name: str, down_seconds: float) -> FaultRun:
    """SIGKILL a control-plane process, leave it down, start it again."""
    scene.cluster.kill_component(name)
    time.sleep(down_seconds)
    scene.cluster.start_component(name)
    started = time.monotonic()
    took = scene.converged(started)
    return FaultRun(name, took, scene.audit(), f"down {down_seconds:.0f} s, then restarted")


def node_recreated(scene: Scene) -> FaultRun:
    """Delete the Node of the first pod; once its devices left the slices, create it again."""
    rack = scene.cluster.rack
    node = pods(scene.api, NAMESPACE)["w0"].spec.node_name
    server = rack.node_names().index(node)
    on_node = sum(1 for p in pods(scene.api, NAMESPACE).values() if p.spec.node_name == node)
    scene.cluster.plane.delete_node(node)
    wait_for(
        f"{node}'s devices unpublished",
        lambda: audit.count_lost(scene.devices, audit.slice_devices(scene.api)) > 0,
        120,
        interval=0.2,
    )
    scene.cluster.plane.create_node(node, node_labels(rack, server))
    started = time.monotonic()
    took = scene.converged(started)
    return FaultRun(
        "node", took, scene.audit(), f"{node} (running {on_node} pods) deleted and re-created"
    )


def daemon_killed_mid_prepare(scene: Scene, claims: int = 10) -> FaultRun:
    """Ten claims at once; SIGKILL the daemon as soon as the first is being prepared."""
    cluster = scene.cluster
    before = {uid for records in cluster.checkpoints().values() for uid in records}
    names = [f"burst{i}" for i in range(claims)]
    with ThreadPoolExecutor(1) as pool:
        creating = pool.submit(create_many, scene.api, NAMESPACE, names, "core")

        def preparing() -> int:
            now = {uid for records in cluster.checkpoints().values() for uid in records}
            return len(now - before)

        at_kill = wait_for("a prepare of the burst", preparing, 120, interval=0.02)
        cluster.kill_child(f"node-{cluster.rack.name}")
        started = time.monotonic()
        creating.result()
    pods = wait_running(scene.api, NAMESPACE, names, timeout=300)
    took = time.monotonic() - started
    scene.pods |= {n: pods[n] for n in names}
    return FaultRun(
        "node daemon",
        took,
        scene.audit(),
        f"SIGKILL with {at_kill} of {claims} claims in the checkpoint",
    )


def lease_holder(api: client.ApiClient, argv: list[str]) -> str:
    """Who holds the Lease the controller started with `argv` competes for."""
    flags = dict(arg.removeprefix("--").split("=", 1) for arg in argv if "=" in arg)
    try:
        lease = client.CoordinationV1Api(api).read_namespaced_lease(
            flags["lease-name"], flags["lease-namespace"]
        )
    except client.ApiException:
        return ""
    return str(lease.spec.holder_identity or "")


def rack_published(api: client.ApiClient, name: str, devices: set[str]) -> bool:
    try:
        obj = client.CustomObjectsApi(api).get_cluster_custom_object(
            API_GROUP, API_VERSION, "ultraservers", name
        )
    except client.ApiException:
        return False
    conditions = {c["type"]: c["status"] for c in (obj.get("status") or {}).get("conditions", [])}
    pool = audit.slice_devices(api, labels=f"{rack_label(DEFAULT_DRIVER_NAME)}={name}").get(name)
    return conditions.get("Published") == "True" and pool is not None and set(pool) == devices


def controller_takeover(scene: Scene, racks: int = 10, generation: str = "trn3-gen1") -> FaultRun:
    """A standby replica; ten racks created at once; the leader SIGKILLed once
    the first of their slices appears. The standby must finish the job."""
    cluster = scene.cluster
    port = free_port()
    # The leader's own command line (its ServiceAccount and Lease), on another port.
    argv = [
        f"--http-address=127.0.0.1:{port}" if arg.startswith("--http-address=") else arg
        for arg in cluster.local.children["controller"].argv
    ]
    standby = Child.start("controller-standby", argv, cluster.paths.logs / "controller-b.log")
    try:
        host = socket.gethostname()
        leader_pid = cluster.pid("controller")
        wait_for(
            "the first replica to lead",
            lambda: lease_holder(scene.api, argv) == f"{host}-{leader_pid}",
        )
        names = [f"chaos-{generation}-{i}" for i in range(racks)]
        servers = rack_spec(generation).servers
        nodes = [(f"{rack}-n{i}", rack) for rack in names for i in range(servers)]
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda item: cluster.plane.create_node(item[0]), nodes))
        objects = client.CustomObjectsApi(scene.api)
        for rack in names:
            members = [n for n, r in nodes if r == rack]
            body = {
                "apiVersion": f"{API_GROUP}/{API_VERSION}",
                "kind": "UltraServer",
                "metadata": {"name": rack},
                "spec": {"generation": generation, "nodes": {"names": members}},
            }
            objects.create_cluster_custom_object(API_GROUP, API_VERSION, "ultraservers", body)
        wait_for(
            "the first slice of the new racks",
            lambda: any(r in audit.slice_devices(scene.api) for r in names),
            120,
            interval=0.02,
        )
        done_at_kill = sum(1 for r in names if r in audit.slice_devices(scene.api))
        cluster.kill_child("controller")
        started = time.monotonic()
        expected = {d.name for d in planned_devices(rack_spec(generation), "partitioned", "chip")}
        wait_for(
            f"{racks} racks published by the standby",
            lambda: all(rack_published(scene.api, r, expected) for r in names),
            300,
            interval=0.2,
        )
        took = time.monotonic() - started
        holder = lease_holder(scene.api, argv)
        result = scene.audit()
        lost = sum(len(expected - set(audit.slice_devices(scene.api).get(r, {}))) for r in names)
        result = audit.Audit(
            duplicated_devices=result.duplicated_devices + stale_generations(scene.api, names),
            lost_devices=result.lost_devices + lost,
            claims_prepared_twice=result.claims_prepared_twice,
            leaked_cores=result.leaked_cores,
            pods_wrongly_evicted=result.pods_wrongly_evicted,
        )
        for rack in names:
            objects.delete_cluster_custom_object(API_GROUP, API_VERSION, "ultraservers", rack)
        wait_for(
            "the new racks' slices removed",
            lambda: not any(r in audit.slice_devices(scene.api) for r in names),
            120,
        )
        for node, _ in nodes:
            cluster.plane.delete_node(node)
    finally:
        standby.stop()
    return FaultRun(
        "controller",
        took,
        result,
        f"leader SIGKILLed with {done_at_kill} of {racks} racks started; "
        f"standby {holder} took over",
    )


def stale_generations(api: client.ApiClient, pools: list[str]) -> int:
    """Slices of an older pool generation still present after convergence."""
    slices = client.ResourceV1Api(api).list_resource_slice().items
    newest: dict[str, int] = {}
    for s in slices:
        newest[s.spec.pool.name] = max(newest.get(s.spec.pool.name, 0), s.spec.pool.generation)
    return sum(
        1
        for s in slices
        if s.spec.pool.name in pools and s.spec.pool.generation < newest[s.spec.pool.name]
    )


FAULTS: dict[str, Callable[[Scene], FaultRun]] = {
    "apiserver": lambda scene: restart_component(scene, "kube-apiserver", 5.0),
    "etcd": lambda scene: restart_component(scene, "etcd", 5.0),
    "controller": controller_takeover,
    "node": node_recreated,
    "daemon": daemon_killed_mid_prepare,
}
"""Every platform fault, in the order a run applies them to one scene."""
