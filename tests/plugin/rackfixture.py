"""A small partitioned rack on the real control plane for the node daemon's tests.

Published here (the controller is tested on its own): one pool of two servers
with exact per-core counters, per-device node selection, and a rack-wide
`ultraserver` device shared by both nodes. The driver name is unique to these
tests so other tests' claims never land on these devices.
"""

import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

from kubernetes import client as k8s

from driver.localsim.controlplane import ControlPlane
from simdevice.topology import rack_spec

DRIVER = "plugintest.sim.dev"
RACK_ID = "plugintest-rack"
NAMESPACE = "plugintest"
NODES = ("plugintest-n0", "plugintest-n1")
RACK = rack_spec("trn3-gen2")
RACK_LABEL = "plugintest.sim.dev/rack"
CLASS = "plugintest.sim.dev"
T = TypeVar("T")


def wait_for(what: str, probe: Callable[[], T | None], timeout: float = 60.0) -> T:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = probe()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")


def _attrs(**values: Any) -> dict[str, Any]:
    return {k: {"int": v} if isinstance(v, int) else {"string": v} for k, v in values.items()}


def _consume(server: int, cores: list[tuple[int, int]]) -> dict[str, Any]:
    return {
        "counterSet": f"server-{server}",
        "counters": {f"chip{c}-core{k}": {"value": "1"} for c, k in cores},
    }


def server_devices(server: int, node: str) -> list[dict[str, Any]]:
    cores = RACK.chip.cores
    out = []
    for chip in range(RACK.chips_per_server):
        for size in (1, 2, 4, 8):
            for start in range(0, cores, size):
                kind = "chip" if size == cores else "core"
                name = (
                    f"s{server}-chip{chip}"
                    if kind == "chip"
                    else (f"s{server}-c{chip}-cores{start}-{size}")
                )
                out.append(
                    {
                        "name": name,
                        "nodeName": node,
                        "attributes": _attrs(
                            resourceType=kind,
                            ultraserverId=RACK_ID,
                            serverIndex=server,
                            chipIndex=chip,
                            coreStart=start,
                            coreCount=size,
                            nodeName=node,
                        ),
                        "consumesCounters": [
                            _consume(server, [(chip, k) for k in range(start, start + size)])
                        ],
                    }
                )
    every = [(c, k) for c in range(RACK.chips_per_server) for k in range(cores)]
    out.append(
        {
            "name": f"s{server}",
            "nodeName": node,
            "attributes": _attrs(
                resourceType="server",
                ultraserverId=RACK_ID,
                serverIndex=server,
                coreStart=0,
                coreCount=len(every),
                nodeName=node,
            ),
            "consumesCounters": [_consume(server, every)],
        }
    )
    return out


def slices() -> list[dict[str, Any]]:
    every = [(c, k) for c in range(RACK.chips_per_server) for k in range(RACK.chip.cores)]
    count = 2 + len(NODES)
    pool = {"name": RACK_ID, "generation": 1, "resourceSliceCount": count}

    def one(name: str, spec: dict[str, Any]) -> dict[str, Any]:
        return {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": name},
            "spec": {"driver": DRIVER, "pool": pool, **spec},
        }

    counters = one(
        "plugintest-counters",
        {
            "allNodes": True,
            "sharedCounters": [
                {
                    "name": f"server-{s}",
                    "counters": {f"chip{c}-core{k}": {"value": "1"} for c, k in every},
                }
                for s in range(len(NODES))
            ],
        },
    )
    servers = [
        one(
            f"plugintest-server-{s}",
            {"perDeviceNodeSelection": True, "devices": server_devices(s, node)},
        )
        for s, node in enumerate(NODES)
    ]
    rack_selector = {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": RACK_LABEL, "operator": "In", "values": [RACK_ID]}]}
        ]
    }
    ultraserver = one(
        "plugintest-ultraserver",
        {
            "perDeviceNodeSelection": True,
            "devices": [
                {
                    "name": "rack",
                    "nodeSelector": rack_selector,
                    "attributes": _attrs(
                        resourceType="ultraserver",
                        ultraserverId=RACK_ID,
                        coreStart=0,
                        coreCount=len(every) * len(NODES),
                    ),
                    "consumesCounters": [_consume(s, every) for s in range(len(NODES))],
                }
            ],
        },
    )
    return [counters, *servers, ultraserver]


@dataclass
class Rack:
    plane: ControlPlane
    api: k8s.ApiClient

    def create_claim(
        self,
        name: str,
        count: int = 1,
        selector: str = "",
        config: Mapping[str, Any] | None = None,
    ) -> None:
        request: dict[str, Any] = {"deviceClassName": CLASS, "count": count}
        if selector:
            request["selectors"] = [{"cel": {"expression": selector}}]
        spec: dict[str, Any] = {"devices": {"requests": [{"name": "req", "exactly": request}]}}
        if config is not None:
            spec["devices"]["config"] = [
                {"requests": ["req"], "opaque": {"driver": DRIVER, "parameters": dict(config)}}
            ]
        body = {"metadata": {"name": name, "namespace": NAMESPACE}, "spec": spec}
        k8s.ResourceV1Api(self.api).create_namespaced_resource_claim(NAMESPACE, body)

    def create_pod(self, name: str, claim: str, node: str | None = None) -> None:
        spec: dict[str, Any] = {
            "resourceClaims": [{"name": "tr", "resourceClaimName": claim}],
            "containers": [
                {
                    "name": "main",
                    "image": "trainium-job:sim",
                    "resources": {"claims": [{"name": "tr"}]},
                }
            ],
        }
        if node:
            spec["nodeSelector"] = {"kubernetes.io/hostname": node}
        k8s.CoreV1Api(self.api).create_namespaced_pod(
            NAMESPACE, {"metadata": {"name": name, "namespace": NAMESPACE}, "spec": spec}
        )

    def bound_pod(self, name: str) -> dict[str, Any]:
        """The pod once the real scheduler has bound it and its claim is reserved for it."""
        core = k8s.CoreV1Api(self.api)

        def probe() -> dict[str, Any] | None:
            pod: dict[str, Any] = self.api.sanitize_for_serialization(
                core.read_namespaced_pod(name, NAMESPACE)
            )
            return pod if pod["spec"].get("nodeName") else None

        return wait_for(f"pod {name} to be scheduled", probe)

    def claim(self, name: str) -> dict[str, Any]:
        found: dict[str, Any] = self.api.sanitize_for_serialization(
            k8s.ResourceV1Api(self.api).read_namespaced_resource_claim(name, NAMESPACE)
        )
        return found

    def delete_claim(self, claim: str, *pods: str) -> None:
        """Delete the pods, wait until they are gone, then the claim."""
        for pod in pods:
            with suppress(k8s.ApiException):
                k8s.CoreV1Api(self.api).delete_namespaced_pod(
                    pod, NAMESPACE, grace_period_seconds=0
                )
        for pod in pods:
            wait_for(f"pod {pod} to go", partial(self._gone_pod, pod))
        with suppress(k8s.ApiException):
            k8s.ResourceV1Api(self.api).delete_namespaced_resource_claim(claim, NAMESPACE)
        wait_for(f"claim {claim} to go", lambda: not self._exists_claim(claim))

    def _gone_pod(self, name: str) -> bool:
        return not self._exists_pod(name)

    def _exists_pod(self, name: str) -> bool:
        try:
            k8s.CoreV1Api(self.api).read_namespaced_pod(name, NAMESPACE)
        except k8s.ApiException as err:
            if err.status == 404:
                return False
            raise
        return True

    def _exists_claim(self, name: str) -> bool:
        try:
            k8s.ResourceV1Api(self.api).read_namespaced_resource_claim(name, NAMESPACE)
        except k8s.ApiException as err:
            if err.status == 404:
                return False
            raise
        return True


@contextmanager
def published_rack(plane: ControlPlane) -> Iterator[Rack]:
    """Namespace, nodes, device class and slices; all removed afterwards."""
    api = plane.api_client()
    core, resource = k8s.CoreV1Api(api), k8s.ResourceV1Api(api)
    core.create_namespace({"metadata": {"name": NAMESPACE}})
    for node in NODES:
        plane.create_node(node, {RACK_LABEL: RACK_ID})
    resource.create_device_class(
        {
            "metadata": {"name": CLASS},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
        }
    )
    for item in slices():
        resource.create_resource_slice(item)
    try:
        yield Rack(plane, api)
    finally:
        with suppress(k8s.ApiException):
            core.delete_namespace(NAMESPACE, grace_period_seconds=0)
        for item in slices():
            with suppress(k8s.ApiException):
                resource.delete_resource_slice(item["metadata"]["name"])
        with suppress(k8s.ApiException):
            resource.delete_device_class(CLASS)
        for node in NODES:
            with suppress(k8s.ApiException):
                plane.delete_node(node)
        api.close()
