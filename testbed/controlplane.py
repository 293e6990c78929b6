"""Helpers for driving the controller against a real control plane: install
the chart's CRDs and DeviceClasses, run the controller binary, create racks,
claims and pods, and count the apiserver's write requests. Shared by the
integration tests and benchmarks/controller.py."""

import copy
import re
import subprocess
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from prometheus_client.parser import text_string_to_metric_families

from driver.jsontypes import JSON
from driver.names import DEFAULT_DRIVER_NAME
from localsim.controlplane import chart
from localsim.controlplane.binaries import Binaries
from localsim.controlplane.plane import ControlPlane
from testbed.waiting import wait_for

ROOT = Path(__file__).resolve().parents[1]
CHART = ROOT / "charts" / "trainium-dra"
CLAIMS_DIR = Path(__file__).resolve().parent / "claims"
CONTROLLER = ROOT / ".venv" / "bin" / "trainium-dra"
WRITE_VERBS = ("POST", "PUT", "PATCH", "DELETE")


GATEWAY_TIMEOUT = 504


def delete_collection(what: str, delete: Callable[[], object], timeout: float = 300.0) -> None:
    """Call a `delete_collection_*` until the apiserver answers it. The
    apiserver deletes a collection one object at a time, and on a loaded
    machine a rack's thousand pods outlast its request timeout: it answers
    504 with part of them deleted, and the next call goes on from there."""

    def answered() -> bool:
        try:
            delete()
        except ApiException as err:
            if err.status != GATEWAY_TIMEOUT:
                raise
            return False
        return True

    wait_for(f"{what} deleted", answered, timeout, interval=1.0)


def clear_pods_and_claims(api: client.ApiClient, namespace: str) -> None:
    """Delete a namespace's pods at once and then its claims, each through
    `delete_collection`, without waiting for them to go: the clean-up a test
    that filled a rack leaves for the next."""
    core = client.CoreV1Api(api)
    delete_collection(
        f"pods of {namespace}",
        lambda: core.delete_collection_namespaced_pod(namespace, grace_period_seconds=0),
    )
    delete_collection(
        f"claims of {namespace}",
        lambda: client.ResourceV1Api(api).delete_collection_namespaced_resource_claim(namespace),
    )


def install(cp: ControlPlane, driver: str = DEFAULT_DRIVER_NAME) -> None:
    """Apply the chart's CRDs and DeviceClasses (idempotent; shared by tests)."""
    cp.kubectl("apply", "-f", str(CHART / "crds"))
    cp.kubectl(
        "wait",
        "--for=condition=Established",
        "crd/ultraservers.trainium.sim.dev",
        "crd/nodedevicehealths.trainium.sim.dev",
    )
    rendered = yaml.safe_load_all(chart.render(chart.helm_binary(Binaries.locate()), driver))
    classes = [d for d in rendered if isinstance(d, dict) and d.get("kind") == "DeviceClass"]
    cp.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(classes))


@contextmanager
def controller(cp: ControlPlane, log: Path, *args: str) -> Iterator[subprocess.Popen[bytes]]:
    """The real controller process; stopped with SIGTERM (then SIGKILL) on exit.
    It serves HTTP on a port of its choosing unless `args` give --http-address."""
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [
                str(CONTROLLER),
                "controller",
                "--kubeconfig",
                str(cp.kubeconfig),
                "--http-address=127.0.0.1:0",
                *args,
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        yield proc
    finally:
        stop(proc)


def stop(proc: subprocess.Popen[bytes], timeout: float = 20.0) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def metric_key(name: str, **labels: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    return name, tuple(sorted(labels.items()))


def metric_samples(text: str) -> Samples:
    """Every sample of a Prometheus text exposition, keyed by `metric_key`."""
    return {
        metric_key(s.name, **s.labels): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def request_counts(cp: ControlPlane) -> dict[tuple[str, str, str], int]:
    """apiserver_request_total summed by (resource, subresource, verb)."""
    text = cp.kubectl("get", "--raw", "/metrics").stdout
    counts: dict[tuple[str, str, str], int] = {}
    for line in text.splitlines():
        if not line.startswith("apiserver_request_total{"):
            continue
        labels = dict(re.findall(r'(\w+)="([^"]*)"', line.split("}")[0]))
        key = (labels.get("resource", ""), labels.get("subresource", ""), labels.get("verb", ""))
        counts[key] = counts.get(key, 0) + int(float(line.rsplit(" ", 1)[1]))
    return counts


def delta(
    before: Mapping[tuple[str, str, str], int], after: Mapping[tuple[str, str, str], int]
) -> dict[tuple[str, str, str], int]:
    return {k: v - before.get(k, 0) for k, v in after.items() if v - before.get(k, 0) > 0}


def writes(d: Mapping[tuple[str, str, str], int], resources: Iterable[str]) -> int:
    wanted = set(resources)
    return sum(v for (res, _, verb), v in d.items() if res in wanted and verb in WRITE_VERBS)


def ultraserver(name: str, generation: str, nodes: list[str], **spec: Any) -> JSON:
    return {
        "apiVersion": "trainium.sim.dev/v1alpha1",
        "kind": "UltraServer",
        "metadata": {"name": name},
        "spec": {"generation": generation, "nodes": {"names": nodes}, **spec},
    }


def custom(cp_api: client.ApiClient) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(cp_api)


def rack_slices(api: client.ApiClient, rack: str, driver: str = DEFAULT_DRIVER_NAME) -> list[JSON]:
    out = custom(api).list_cluster_custom_object(
        "resource.k8s.io", "v1", "resourceslices", label_selector=f"{driver}/ultraserver={rack}"
    )
    items: list[JSON] = out["items"]
    return items


def get_rack(api: client.ApiClient, name: str) -> JSON | None:
    try:
        obj: JSON = custom(api).get_cluster_custom_object(
            "trainium.sim.dev", "v1alpha1", "ultraservers", name
        )
    except ApiException as err:
        if err.status == 404:
            return None
        raise
    return obj


def condition(rack: JSON | None, kind: str) -> JSON | None:
    for c in ((rack or {}).get("status") or {}).get("conditions") or []:
        if c["type"] == kind:
            return dict(c)
    return None


def published(api: client.ApiClient, rack: str, slices: int, generation: int | None = None) -> bool:
    """All `slices` slices exist, each pool's at one generation (the highest
    `generation` when given), and status says Published. Obsolete slices are
    deleted before the others move to the new generation, so a count alone can
    still be the old generation. Pools move apart: a change in one server's
    pool (`node`, `server` layouts) leaves the others' generation."""
    items = rack_slices(api, rack)
    by_pool: dict[str, set[int]] = {}
    for s in items:
        by_pool.setdefault(s["spec"]["pool"]["name"], set()).add(s["spec"]["pool"]["generation"])
    top = max((g for gens in by_pool.values() for g in gens), default=None)
    ok = condition(get_rack(api, rack), "Published")
    return (
        len(items) == slices
        and all(len(gens) == 1 for gens in by_pool.values())
        and (generation is None or top == generation)
        and ok is not None
        and ok["status"] == "True"
    )


def load_claim(name: str, new_name: str, namespace: str, rack: str | None = None) -> JSON:
    """An example claim from claims/, renamed, optionally pinned to one rack."""
    claim: JSON = yaml.safe_load((CLAIMS_DIR / f"{name}.yaml").read_text())
    claim = copy.deepcopy(claim)
    claim["metadata"] = {"name": new_name, "namespace": namespace}
    if rack is not None:
        attr = f'device.attributes["{DEFAULT_DRIVER_NAME}"].ultraserverId'
        pin = {"cel": {"expression": f'{attr} == "{rack}"'}}
        for request in claim["spec"]["devices"]["requests"]:
            for sub in [request.get("exactly"), *(request.get("firstAvailable") or [])]:
                if sub is not None:
                    sub.setdefault("selectors", []).append(pin)
    return claim


def pod(name: str, namespace: str, claims: list[str], on: Sequence[str] = ()) -> JSON:
    """A pod of `claims` that nothing runs; only on the nodes `on` if any are
    named (by node affinity on the name, which the scheduler applies before
    it looks at any other node's devices)."""
    spec: JSON = {
        "containers": [
            {
                "name": "main",
                "image": "registry.invalid/trainium-workload:none",
                "resources": {"claims": [{"name": f"c{i}"} for i in range(len(claims))]},
            }
        ],
        "resourceClaims": [{"name": f"c{i}", "resourceClaimName": c} for i, c in enumerate(claims)],
        "terminationGracePeriodSeconds": 0,
    }
    if on:
        # A field selector takes one name: a term per node, any of which may hold.
        terms = [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
            for node in on
        ]
        spec["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}
            }
        }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def create_claim_and_pod(api: client.ApiClient, claim: JSON, on: Sequence[str] = ()) -> None:
    ns, name = claim["metadata"]["namespace"], claim["metadata"]["name"]
    custom(api).create_namespaced_custom_object(
        "resource.k8s.io", "v1", ns, "resourceclaims", claim
    )
    client.CoreV1Api(api).create_namespaced_pod(ns, pod(name, ns, [name], on))


def allocation(api: client.ApiClient, namespace: str, name: str) -> list[JSON] | None:
    claim = custom(api).get_namespaced_custom_object(
        "resource.k8s.io", "v1", namespace, "resourceclaims", name
    )
    results = (((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}).get(
        "results"
    )
    return list(results) if results else None


def unschedulable(api: client.ApiClient, namespace: str, name: str) -> str | None:
    """The scheduler's message when it gave up on the pod for now."""
    p = client.CoreV1Api(api).read_namespaced_pod(name, namespace)
    for c in p.status.conditions or []:
        if c.type == "PodScheduled" and c.status == "False" and c.reason == "Unschedulable":
            return str(c.message)
    return None


@contextmanager
def node_pool_racks(
    cp: ControlPlane,
    log: Path,
    lease: str,
    namespace: str,
    racks: Mapping[str, list[str]],
    *args: str,
    generation: str = "trn3-gen1",
    pools: str = "node",
) -> Iterator[client.ApiClient]:
    """Racks of `generation` in the `pools` layout (fabric up at once) on
    nodes of their own, the controller run with `args` under Lease `lease`, and
    `namespace` for the test's claims; all of it removed on exit."""
    install(cp)
    nodes = [n for members in racks.values() for n in members]
    for node in nodes:
        cp.create_node(node)
    with cp.api_client() as api, controller(cp, log, "--lease-name", lease, *args):
        core = client.CoreV1Api(api)
        core.create_namespace({"metadata": {"name": namespace}})
        objects = custom(api)
        for rack, members in racks.items():
            spec = ultraserver(rack, generation, members, pools=pools)
            spec["spec"]["fabric"] = {"setupSeconds": 0}
            objects.create_cluster_custom_object(
                "trainium.sim.dev", "v1alpha1", "ultraservers", spec
            )
        try:
            yield api
        finally:
            core.delete_namespace(namespace)
            for rack in racks:
                objects.delete_cluster_custom_object(
                    "trainium.sim.dev", "v1alpha1", "ultraservers", rack
                )
            wait_for("slices removed", lambda: not any(rack_slices(api, r) for r in racks), 60)
            for node in nodes:
                cp.delete_node(node)
            objects.delete_namespaced_custom_object(
                "coordination.k8s.io", "v1", "default", "leases", lease
            )


def write_allocated(api: client.ApiClient, claims: Iterable[tuple[JSON, JSON]]) -> None:
    """Create each claim, then write its `status` (an allocation, as the
    scheduler writes it), four threads with a client each."""
    local = threading.local()

    def write(item: tuple[JSON, JSON]) -> None:
        if not hasattr(local, "api"):
            local.api = client.ApiClient(api.configuration)
        claim, status = item
        meta = claim["metadata"]
        objects = custom(local.api)
        created = objects.create_namespaced_custom_object(
            "resource.k8s.io", "v1", meta["namespace"], "resourceclaims", claim
        )
        created["status"] = status
        objects.replace_namespaced_custom_object_status(
            "resource.k8s.io", "v1", meta["namespace"], "resourceclaims", meta["name"], created
        )

    with ThreadPoolExecutor(4) as threads:
        list(threads.map(write, claims))
