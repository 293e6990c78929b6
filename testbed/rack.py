"""A small partitioned rack on the real control plane for the node daemon's tests.

Published here (the controller is tested on its own): one pool of two servers
with exact per-core counters, per-device node selection, and a rack-wide
`ultraserver` device shared by both nodes. The driver name is unique to these
tests so other tests' claims never land on these devices.
"""

from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from functools import cached_property, partial
from typing import Any, TypeVar

from kubernetes import client as k8s

from driver.kubeapi.apiserver import ApiServer
from driver.kubeapi.objects import Objects
from driver.names import rack_label
from localsim.controlplane.plane import ControlPlane
from simdevice.topology import rack_spec
from testbed.waiting import wait_for

DRIVER = "plugintest.sim.dev"
RACK_ID = "plugintest-rack"
NAMESPACE = "plugintest"
NODES = ("plugintest-n0", "plugintest-n1")
RACK = rack_spec("trn3-gen2")
T = TypeVar("T")


@dataclass(frozen=True)
class Site:
    """Names of one test rack: driver (also the device class), pool, namespace, nodes."""

    driver: str
    rack_id: str
    namespace: str
    nodes: tuple[str, ...]

    @property
    def rack_label(self) -> str:
        return f"{self.driver}/rack"


SITE = Site(DRIVER, RACK_ID, NAMESPACE, NODES)


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
            "metadata": {"name": name, "labels": {rack_label(DRIVER): RACK_ID}},
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
            {"matchExpressions": [{"key": SITE.rack_label, "operator": "In", "values": [RACK_ID]}]}
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

    @cached_property
    def objects(self) -> Objects:
        """The same credentials through the driver's own client (the kubelet
        stand-in reads claims with it)."""
        return Objects(ApiServer(self.api.configuration, "trainium-dra-test", 30.0))

    site: Site = SITE

    def create_claim(
        self,
        name: str,
        count: int = 1,
        selector: str = "",
        config: Mapping[str, Any] | None = None,
    ) -> None:
        request: dict[str, Any] = {"deviceClassName": self.site.driver, "count": count}
        if selector:
            request["selectors"] = [{"cel": {"expression": selector}}]
        spec: dict[str, Any] = {"devices": {"requests": [{"name": "req", "exactly": request}]}}
        if config is not None:
            spec["devices"]["config"] = [
                {
                    "requests": ["req"],
                    "opaque": {"driver": self.site.driver, "parameters": dict(config)},
                }
            ]
        body = {"metadata": {"name": name, "namespace": self.site.namespace}, "spec": spec}
        k8s.ResourceV1Api(self.api).create_namespaced_resource_claim(self.site.namespace, body)

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
            self.site.namespace,
            {"metadata": {"name": name, "namespace": self.site.namespace}, "spec": spec},
        )

    def bound_pod(self, name: str) -> dict[str, Any]:
        """The pod once the real scheduler has bound it and its claim is reserved for it."""
        core = k8s.CoreV1Api(self.api)

        def probe() -> dict[str, Any] | None:
            pod: dict[str, Any] = self.api.sanitize_for_serialization(
                core.read_namespaced_pod(name, self.site.namespace)
            )
            return pod if pod["spec"].get("nodeName") else None

        return wait_for(f"pod {name} to be scheduled", probe)

    def claim(self, name: str) -> dict[str, Any]:
        found: dict[str, Any] = self.api.sanitize_for_serialization(
            k8s.ResourceV1Api(self.api).read_namespaced_resource_claim(name, self.site.namespace)
        )
        return found

    def delete_claim(self, claim: str, *pods: str) -> None:
        """Delete the pods, wait until they are gone, then the claim."""
        for pod in pods:
            with suppress(k8s.ApiException):
                k8s.CoreV1Api(self.api).delete_namespaced_pod(
                    pod, self.site.namespace, grace_period_seconds=0
                )
        for pod in pods:
            wait_for(f"pod {pod} to go", partial(self._gone_pod, pod))
        with suppress(k8s.ApiException):
            k8s.ResourceV1Api(self.api).delete_namespaced_resource_claim(claim, self.site.namespace)
        wait_for(f"claim {claim} to go", lambda: not self._exists_claim(claim))

    def _gone_pod(self, name: str) -> bool:
        return not self._exists_pod(name)

    def _exists_pod(self, name: str) -> bool:
        try:
            k8s.CoreV1Api(self.api).read_namespaced_pod(name, self.site.namespace)
        except k8s.ApiException as err:
            if err.status == 404:
                return False
            raise
        return True

    def _exists_claim(self, name: str) -> bool:
        try:
            k8s.ResourceV1Api(self.api).read_namespaced_resource_claim(name, self.site.namespace)
        except k8s.ApiException as err:
            if err.status == 404:
                return False
            raise
        return True


def _namespace_gone(core: k8s.CoreV1Api, site: Site) -> bool:
    try:
        core.read_namespace(site.namespace)
    except k8s.ApiException as err:
        if err.status == 404:
            return True
        raise
    return False


@contextmanager
def published_rack(
    plane: ControlPlane,
    site: Site = SITE,
    items: list[dict[str, Any]] | None = None,
    device_class: bool = True,
) -> Iterator[Rack]:
    """Namespace, nodes, device class (unless the chart's are used) and slices
    (default: `slices()`); all removed afterwards."""
    items = slices() if items is None else items
    api = plane.api_client()
    core, resource = k8s.CoreV1Api(api), k8s.ResourceV1Api(api)
    core.create_namespace({"metadata": {"name": site.namespace}})
    for node in site.nodes:
        plane.create_node(node, {site.rack_label: site.rack_id})
    if device_class:
        selector = {"cel": {"expression": f'device.driver == "{site.driver}"'}}
        resource.create_device_class(
            {"metadata": {"name": site.driver}, "spec": {"selectors": [selector]}}
        )
    for item in items:
        resource.create_resource_slice(item)
    try:
        yield Rack(plane, api, site)
    finally:
        with suppress(k8s.ApiException):  # no kubelet confirms pod deletion: force it
            core.delete_collection_namespaced_pod(site.namespace, grace_period_seconds=0)
        with suppress(k8s.ApiException):
            core.delete_namespace(site.namespace, grace_period_seconds=0)
        wait_for(f"namespace {site.namespace} to go", partial(_namespace_gone, core, site))
        for item in items:
            with suppress(k8s.ApiException):
                resource.delete_resource_slice(item["metadata"]["name"])
        if device_class:
            with suppress(k8s.ApiException):
                resource.delete_device_class(site.driver)
        for node in site.nodes:
            with suppress(k8s.ApiException):
                plane.delete_node(node)
        api.close()
