"""The node daemon SIGKILLed while the real kubelet prepares a burst of claims.

On a real-nodes cluster (real kubelet, containerd, the daemon as a DaemonSet
pod): `pods` pods with a whole-chip claim each are created at once on one
node; the daemon is killed as soon as the first claim of the burst is
recorded in the node's checkpoint (one prepare has reached the disk, the
others are queued or in flight in the kubelet), and the kubelet restarts its
container. A trial then counts what must stay 0: cores handed to two claims,
claims recorded with devices other than those allocated, checkpoint records
and CDI specs that are not exactly the claims of the node's pods (while they
run and after they are deleted), pods deleted or restarted, slices replaced
and devices duplicated or lost.

`count_*` and `Trial` are pure; `kill_during_burst` drives the cluster.
"""

import json
import time
from collections.abc import Mapping, Set
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx
from kubernetes import client

from driver.jsontypes import JSON
from driver.node.durable.checkpoint import Checkpoint, CheckpointError, ClaimRecord
from testbed.chaos import audit
from testbed.controlplane import metric_samples
from testbed.realnodes import (
    DRIVER,
    RealCluster,
    claim_template,
    namespace,
    workload_pod,
)
from testbed.waiting import wait_for

TRIGGER = "the first claim of the burst recorded in the node's checkpoint"
CDI_PREFIX = f"k8s.{DRIVER}-claim_"
PodState = tuple[str, int]
"""A pod's uid and the restarts of its containers."""


@dataclass(frozen=True)
class Trial:
    """One burst with one kill: what happened (the first six figures) and the
    counts that must be 0 (`counts`), with `detail` naming what was disturbed."""

    pods: int
    recorded_at_kill: int
    prepares_cut: int
    daemon_back_seconds: float
    all_running_seconds: float
    restarted_daemon_prepares: int | None
    cores_handed_twice: int
    claims_with_other_devices: int
    checkpoint_off_while_running: int
    cdi_off_while_running: int
    leaked_cores_after_delete: int
    cdi_left_after_delete: int
    pods_disturbed: int
    workload_api_lost: int
    slices_replaced: int
    devices_duplicated: int
    devices_lost: int
    detail: tuple[str, ...] = ()

    def counts(self) -> dict[str, int]:
        """The figures that must be 0."""
        return {k: v for k, v in asdict(self).items() if k in ZERO_COUNTS}

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["daemon_back_seconds"] = round(self.daemon_back_seconds, 1)
        out["all_running_seconds"] = round(self.all_running_seconds, 1)
        out["detail"] = list(self.detail)
        return out


ZERO_COUNTS = (
    "cores_handed_twice",
    "claims_with_other_devices",
    "checkpoint_off_while_running",
    "cdi_off_while_running",
    "leaked_cores_after_delete",
    "cdi_left_after_delete",
    "pods_disturbed",
    "workload_api_lost",
    "slices_replaced",
    "devices_duplicated",
    "devices_lost",
)


# --- pure counts --------------------------------------------------------------


def count_cores_handed_twice(
    records: Mapping[str, ClaimRecord], visible: Mapping[str, list[int]]
) -> int:
    """Cores of the node held by two claims in the checkpoint, plus logical
    cores that two claims' CDI specs give their containers."""
    twice = audit.count_prepared_twice({"node": records})
    seen: dict[int, int] = {}
    for cores in visible.values():
        for core in cores:
            seen[core] = seen.get(core, 0) + 1
    return twice + sum(n - 1 for n in seen.values() if n > 1)


def count_other_devices(
    records: Mapping[str, ClaimRecord], allocated: Mapping[str, set[str]]
) -> int:
    """Claims the checkpoint records with devices other than the scheduler allocated."""
    return sum(
        1
        for uid, devices in allocated.items()
        if uid in records and {d.device for d in records[uid].devices} != devices
    )


def count_off(recorded: Set[str], live: Set[str]) -> int:
    """Claims recorded but not live (leaked) plus live but not recorded (lost)."""
    return len(recorded ^ live)


def disturbed(before: Mapping[str, PodState], after: Mapping[str, PodState]) -> list[str]:
    """Pods that are gone, replaced by another uid, or whose containers restarted."""
    out = []
    for name, (uid, restarts) in before.items():
        now = after.get(name)
        if now is None:
            out.append(f"{name} gone")
        elif now[0] != uid:
            out.append(f"{name} replaced")
        elif now[1] != restarts:
            out.append(f"{name} restarted {now[1] - restarts}x")
    return out


def count_replaced(before: Mapping[str, str], after: Mapping[str, str]) -> int:
    """Slices (name -> uid) deleted, re-created or added."""
    return len(set(before.items()) ^ set(after.items()))


def cdi_claims(names: list[str]) -> set[str]:
    """Claim uids of the daemon's CDI spec file names."""
    return {
        n.removeprefix(CDI_PREFIX).removesuffix(".json")
        for n in names
        if n.startswith(CDI_PREFIX) and n.endswith(".json")
    }


def visible_cores(spec: JSON) -> list[int]:
    """The logical cores a CDI spec gives its containers (NEURON_RT_VISIBLE_CORES)."""
    for device in spec.get("devices") or []:
        for item in (device.get("containerEdits") or {}).get("env") or []:
            key, _, value = item.partition("=")
            if key == "NEURON_RT_VISIBLE_CORES" and value:
                return [int(c) for c in value.split(",")]
    return []


# --- reading the node and the cluster ------------------------------------------


class NodeView:
    """What one real node holds for claims: checkpoint, CDI specs, its pods."""

    def __init__(self, real: RealCluster, node: str) -> None:
        self.real, self.node = real, node
        self.cdi_dir = real.nodes[node].dir("cdi")
        self.checkpoint = real.nodes[node].dir("state") / node / "checkpoint.json"

    def records(self) -> dict[str, ClaimRecord]:
        """The checkpoint (file and journal); empty while it does not exist yet."""
        if not self.checkpoint.exists():
            return {}
        return Checkpoint(self.checkpoint).claims

    def records_or_none(self) -> dict[str, ClaimRecord] | None:
        """As `records`, None while the daemon is half-way through a rewrite."""
        try:
            return self.records()
        except (CheckpointError, OSError):
            return None

    def cdi_specs(self) -> dict[str, Path]:
        paths = {p.name: p for p in self.cdi_dir.glob(f"{CDI_PREFIX}*.json")}
        return {uid: paths[f"{CDI_PREFIX}{uid}.json"] for uid in cdi_claims(list(paths))}

    def pods(self) -> list[JSON]:
        items = client.CoreV1Api(self.real.api).list_pod_for_all_namespaces(
            field_selector=f"spec.nodeName={self.node}"
        )
        return [self.real.api.sanitize_for_serialization(p) for p in items.items]

    def claim_pods(self) -> dict[str, PodState]:
        """`namespace/name` -> state of the node's pods that have claims."""
        return {
            f"{p['metadata']['namespace']}/{p['metadata']['name']}": pod_state(p)
            for p in self.pods()
            if p["spec"].get("resourceClaims")
        }

    def live_claims(self) -> dict[str, set[str]]:
        """uid -> allocated devices of the claims of the node's pods."""
        resource = client.ResourceV1Api(self.real.api)
        out: dict[str, set[str]] = {}
        for pod in self.pods():
            ns = pod["metadata"]["namespace"]
            for status in pod["status"].get("resourceClaimStatuses") or []:
                if not status.get("resourceClaimName"):
                    continue
                claim = self.real.api.sanitize_for_serialization(
                    resource.read_namespaced_resource_claim(status["resourceClaimName"], ns)
                )
                results = ((claim.get("status") or {}).get("allocation") or {}).get("devices")
                out[claim["metadata"]["uid"]] = {
                    r["device"] for r in (results or {}).get("results") or []
                }
        return out

    def daemon(self) -> JSON:
        return self.real.daemon_pod(self.node)

    def daemon_prepares(self) -> int | None:
        """Claims the running daemon was asked to prepare since it started."""
        pod = self.daemon()
        ip = pod["status"].get("podIP")
        [port] = [
            p["containerPort"]
            for c in pod["spec"]["containers"]
            for p in c.get("ports") or []
            if p.get("name") == "metrics"
        ]
        try:
            text = httpx.get(f"http://{ip}:{port}/metrics", timeout=10).text
        except httpx.HTTPError:
            return None
        return int(
            sum(
                value
                for (name, labels), value in metric_samples(text).items()
                if name == "trainium_dra_node_requests_total"
                and dict(labels).get("operation") == "prepare"
            )
        )


def pod_state(pod: JSON) -> PodState:
    restarts = sum(c.get("restartCount", 0) for c in pod["status"].get("containerStatuses") or [])
    return pod["metadata"]["uid"], restarts


def restarts(pod: JSON) -> int:
    return pod_state(pod)[1]


def ready(pod: JSON) -> bool:
    return all(c.get("ready") for c in pod["status"].get("containerStatuses") or [{}])


def slices(api: client.ApiClient) -> dict[str, str]:
    items = client.ResourceV1Api(api).list_resource_slice(field_selector=f"spec.driver={DRIVER}")
    return {s.metadata.name: s.metadata.uid for s in items.items}


def settled(what: str, probe: Any, timeout: float) -> bool:
    """Whether `probe` came true within `timeout`; a trial measures instead of failing."""
    try:
        wait_for(what, probe, timeout, interval=0.5)
    except AssertionError:
        return False
    return True


def prepares_cut(api: client.ApiClient, ns: str) -> int:
    """Pods of `ns` whose prepare the kubelet reported failed: calls the kill cut."""
    events = client.CoreV1Api(api).list_namespaced_event(
        ns, field_selector="reason=FailedPrepareDynamicResources"
    )
    return len({e.involved_object.name for e in events.items})


def visible_of(specs: Mapping[str, Path], uids: Set[str]) -> dict[str, list[int]]:
    out = {}
    for uid in uids & set(specs):
        try:
            out[uid] = visible_cores(json.loads(specs[uid].read_text()))
        except (OSError, ValueError):
            out[uid] = []
    return out


# --- one trial ------------------------------------------------------------------


def kill_during_burst(
    real: RealCluster, node: str, ns: str, pods: int, timeout: float = 600.0
) -> Trial:
    """Create `pods` chip pods at once on `node`, SIGKILL its daemon mid-prepare,
    wait for all to run, audit, delete them and audit what is left."""
    view = NodeView(real, node)
    resident = view.claim_pods()
    published = slices(real.api)
    devices = audit.slice_devices(real.api)
    daemon_restarts = restarts(view.daemon())
    before = set(view.records())
    real.apply(namespace(ns), claim_template(ns, "chip", "chip.trainium.sim.dev"))
    names = [f"burst-{i}" for i in range(pods)]
    burst: JSON = {
        "apiVersion": "v1",
        "kind": "List",
        "items": [workload_pod(ns, n, "chip", node=node) for n in names],
    }

    def recorded() -> int:
        now = view.records_or_none()
        return len(set(now) - before) if now is not None else 0

    with ThreadPoolExecutor(1) as pool:
        creating = pool.submit(real.apply, burst)
        at_kill = wait_for(TRIGGER, recorded, 300, interval=0.02)
        real.kill(node, "trainium-dra node")
        killed = time.monotonic()
        creating.result()
    created = {f"{ns}/{n}": (uid, 0) for n, uid in pod_uids(real, ns, names).items()}

    def daemon_back() -> bool:
        pod = view.daemon()
        return restarts(pod) > daemon_restarts and ready(pod)

    wait_for(f"the daemon of {node} restarted and ready", daemon_back, timeout, interval=0.2)
    back = time.monotonic() - killed

    def all_running() -> bool:
        states = [real.cluster.pod(ns, n) for n in names]
        return all(p and p["status"].get("phase") == "Running" for p in states)

    wait_for(f"{pods} burst pods Running", all_running, timeout, interval=0.2)
    running_s = time.monotonic() - killed

    live = view.live_claims()
    records = view.records()
    specs = view.cdi_specs()
    twice = count_cores_handed_twice(records, visible_of(specs, set(specs)))
    other = count_other_devices(records, live)
    checkpoint_off = count_off(set(records), set(live))
    cdi_off = count_off(set(specs), set(live))
    cut = prepares_cut(real.api, ns)
    prepares = view.daemon_prepares()
    watched = {**resident, **created}
    moved = disturbed(watched, view.claim_pods())
    lost_api = [name for name in watched if not workload_api_reachable(real, name)]
    detail = [*moved, *(f"{name} workload API unreachable" for name in lost_api)]
    detail += [f"{name} before its restart: {last_error(real, name)}" for name in restarted(moved)]

    real.kubectl("delete", "namespace", ns, "--wait", "--timeout=300s")
    remaining = set(view.live_claims())
    settled(
        "the burst's checkpoint records and CDI specs removed",
        lambda: set(view.records()) == remaining and set(view.cdi_specs()) == remaining,
        120,
    )
    left = view.records()
    now_devices = audit.slice_devices(real.api)
    return Trial(
        pods=pods,
        recorded_at_kill=at_kill,
        prepares_cut=cut,
        daemon_back_seconds=back,
        all_running_seconds=running_s,
        restarted_daemon_prepares=prepares,
        cores_handed_twice=twice,
        claims_with_other_devices=other,
        checkpoint_off_while_running=checkpoint_off,
        cdi_off_while_running=cdi_off,
        leaked_cores_after_delete=audit.count_leaked_cores({node: left}, remaining),
        cdi_left_after_delete=len(set(view.cdi_specs()) - remaining),
        pods_disturbed=len(moved),
        workload_api_lost=len(lost_api),
        slices_replaced=count_replaced(published, slices(real.api)),
        devices_duplicated=audit.count_duplicated(now_devices),
        devices_lost=audit.count_lost(devices, now_devices),
        detail=tuple(detail),
    )


def restarted(moved: list[str]) -> list[str]:
    return [entry.split(" ", 1)[0] for entry in moved if " restarted " in entry]


def workload_api_reachable(real: RealCluster, pod: str) -> bool:
    """Whether the pod's container reaches its claim on the workload API now,
    through the socket its CDI spec mounted when it started."""
    ns, name = pod.split("/", 1)
    argv = ("trainium-dra", "workload", "--exit", "--api-wait=10")
    result = real.cluster.kubectl("-n", ns, "exec", name, "--", *argv, check=False)
    return "workload_api=reachable" in result.stdout


def last_error(real: RealCluster, pod: str) -> str:
    """What the pod's container printed as its error before it was restarted."""
    ns, name = pod.split("/", 1)
    text = real.kubectl("-n", ns, "logs", "--previous", name, check=False)
    errors = [line for line in text.splitlines() if line.startswith("error=")]
    return errors[-1] if errors else text[-300:]


def pod_uids(real: RealCluster, ns: str, names: list[str]) -> dict[str, str]:
    out = {}
    for name in names:
        pod = real.cluster.pod(ns, name)
        assert pod is not None, f"pod {ns}/{name} was not created"
        out[name] = str(pod["metadata"]["uid"])
    return out


def steady_pods(real: RealCluster, node: str, ns: str, count: int) -> None:
    """Chip pods left running on `node` through every trial: they must not be touched."""
    real.apply(namespace(ns), claim_template(ns, "chip", "chip.trainium.sim.dev"))
    for i in range(count):
        real.apply(workload_pod(ns, f"steady-{i}", "chip", node=node))
    for i in range(count):
        real.running(ns, f"steady-{i}")
