"""A kubelet stand-in for DRA drivers: the calls a kubelet makes, in its order.

It discovers the plugin through `<root>/plugins_registry`, calls GetInfo,
checks what the kubelet checks (type, name, endpoint, supported versions),
answers NotifyRegistrationStatus, then calls NodePrepareResources /
NodeUnprepareResources on the advertised DRA socket (v1, else v1beta1) and
can follow the NodeWatchResources health stream. For pods it reads the claims
the way the kubelet does (status.resourceClaimStatuses, reservedFor), and
`container_edits` resolves CDI device ids as a container runtime would.
"""

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from driver.kubeapi.objects import Objects
from driver.kubeapi.resources import CLAIMS
from driver.kubeletplugin import pluginclient, protocol

RPC_TIMEOUT = 45.0


EXTENDED = ""
"""The key `claim_names` gives the claim the scheduler made for the pod's
extended resources (`status.extendedResourceClaimStatus`); pod claim entries
are DNS labels, never empty."""


def claim_names(pod: Mapping[str, Any]) -> dict[str, str]:
    """Pod claim entry -> ResourceClaim name, generated names included, plus the
    scheduler's extended-resource claim under EXTENDED."""
    status = pod.get("status") or {}
    generated = {
        s["name"]: s.get("resourceClaimName") for s in status.get("resourceClaimStatuses") or []
    }
    names = {}
    for entry in pod["spec"].get("resourceClaims") or []:
        name = generated.get(entry["name"]) or entry.get("resourceClaimName")
        if not name:
            raise KubeletError(f"pod claim {entry['name']}: no ResourceClaim generated yet")
        names[entry["name"]] = name
    extended = status.get("extendedResourceClaimStatus") or {}
    if extended.get("resourceClaimName"):
        names[EXTENDED] = extended["resourceClaimName"]
    return names


def container_claim_uses(
    pod: Mapping[str, Any], container: Mapping[str, Any]
) -> list[tuple[str, str | None]]:
    """(pod claim entry, request or None for all) the container uses: its
    `resources.claims`, and the requests the scheduler mapped to its extended
    resources."""
    uses: list[tuple[str, str | None]] = [
        (use["name"], use.get("request"))
        for use in (container.get("resources") or {}).get("claims") or []
    ]
    extended = (pod.get("status") or {}).get("extendedResourceClaimStatus") or {}
    uses.extend(
        (EXTENDED, mapping["requestName"])
        for mapping in extended.get("requestMappings") or []
        if mapping["containerName"] == container["name"]
    )
    return uses


def reserved_for_pod(claim: Mapping[str, Any], pod: Mapping[str, Any]) -> bool:
    """The claim is reserved for the pod itself or for the PodGroup it names:
    a pod does not know its group's uid, so the group matches by name."""
    group = ((pod.get("spec") or {}).get("schedulingGroup") or {}).get("podGroupName")
    for reserved in (claim.get("status") or {}).get("reservedFor") or []:
        if reserved.get("uid") == pod["metadata"]["uid"]:
            return True
        if group and (reserved.get("apiGroup"), reserved.get("resource"), reserved.get("name")) == (
            "scheduling.k8s.io",
            "podgroups",
            group,
        ):
            return True
    return False


class KubeletError(RuntimeError):
    """What the kubelet would log and report as a pod event."""


@dataclass(frozen=True)
class Registered:
    socket: Path  # the registration socket it came from
    endpoint: Path  # the DRA socket
    version: str  # "v1" or "v1beta1"


@dataclass(frozen=True)
class PreparedClaim:
    uid: str
    devices: list[dict[str, Any]]  # request_names, pool_name, device_name, cdi_device_ids


@dataclass
class ContainerEdits:
    env: dict[str, str] = field(default_factory=dict)
    mounts: list[dict[str, Any]] = field(default_factory=list)


class KubeletStandIn:
    def __init__(self, kubelet_root: Path, driver: str) -> None:
        self.root = kubelet_root
        self.driver = driver
        self.plugin: Registered | None = None

    @property
    def registry_dir(self) -> Path:
        return self.root / "plugins_registry"

    def candidate_sockets(self) -> list[Path]:
        """Registration sockets in the registry, newest first (rolling updates)."""
        if not self.registry_dir.is_dir():
            return []
        found = [p for p in self.registry_dir.iterdir() if p.name.endswith(".sock")]
        return sorted(found, key=lambda p: p.stat().st_mtime_ns, reverse=True)

    def register(self, timeout: float = 30.0) -> Registered:
        """Wait for the driver's registration socket and register it, as the kubelet does."""
        deadline = time.monotonic() + timeout
        last_error = "no registration socket in " + str(self.registry_dir)
        while time.monotonic() < deadline:
            for sock in self.candidate_sockets():
                try:
                    self.plugin = self._register(sock)
                    return self.plugin
                except KubeletError as err:
                    last_error = str(err)
            time.sleep(0.05)
        raise KubeletError(f"driver {self.driver} did not register: {last_error}")

    def _register(self, sock: Path) -> Registered:
        with pluginclient.channel(sock) as ch:
            try:
                info = pluginclient.get_info(ch, RPC_TIMEOUT)
            except Exception as err:
                raise KubeletError(f"GetInfo on {sock}: {err}") from err
            problem = validate_info(info, self.driver)
            if problem:
                pluginclient.notify_registration(ch, False, problem, RPC_TIMEOUT)
                raise KubeletError(f"{sock}: {problem}")
            pluginclient.notify_registration(ch, True, "", RPC_TIMEOUT)
        versions = list(info.supported_versions)
        version = "v1" if "v1.DRAPlugin" in versions else "v1beta1"
        return Registered(sock, Path(info.endpoint), version)

    def _plugin(self) -> Registered:
        if self.plugin is None:
            raise KubeletError(f"driver {self.driver} is not registered; call register() first")
        return self.plugin

    def prepare(self, claims: Sequence[tuple[str, str, str]]) -> dict[str, PreparedClaim]:
        """NodePrepareResources for (namespace, uid, name); KubeletError on any claim error."""
        plugin = self._plugin()
        with pluginclient.channel(plugin.endpoint) as ch:
            response = pluginclient.node_prepare(ch, claims, RPC_TIMEOUT, plugin.version)
        out: dict[str, PreparedClaim] = {}
        errors = []
        for _, uid, name in claims:
            if uid not in response.claims:
                errors.append(f"claim {name}: driver returned no result for UID {uid}")
                continue
            result = response.claims[uid]
            if result.error:
                errors.append(f"claim {name}: {result.error}")
                continue
            out[uid] = PreparedClaim(
                uid,
                [
                    {
                        "request_names": list(d.request_names),
                        "pool_name": d.pool_name,
                        "device_name": d.device_name,
                        "cdi_device_ids": list(d.cdi_device_ids),
                    }
                    for d in result.devices
                ],
            )
        if errors:
            raise KubeletError("NodePrepareResources: " + "; ".join(errors))
        return out

    def unprepare(self, claims: Sequence[tuple[str, str, str]]) -> None:
        plugin = self._plugin()
        with pluginclient.channel(plugin.endpoint) as ch:
            response = pluginclient.node_unprepare(ch, claims, RPC_TIMEOUT, plugin.version)
        errors = [
            f"claim {name}: {response.claims[uid].error}"
            for _, uid, name in claims
            if uid not in response.claims or response.claims[uid].error
        ]
        if errors:
            raise KubeletError("NodeUnprepareResources: " + "; ".join(errors))

    def pod_claims(self, api: Objects, pod: Mapping[str, Any]) -> list[tuple[str, str, str]]:
        """(namespace, uid, name) of the pod's claims of this driver, checked like the kubelet."""
        namespace = pod["metadata"]["namespace"]
        refs = []
        for name in claim_names(pod).values():
            claim = api.get(CLAIMS, name, namespace)
            if claim is None:
                raise KubeletError(f"claim {name}: not found")
            if not reserved_for_pod(claim, pod):
                raise KubeletError(f"claim {name}: not reserved for pod {pod['metadata']['name']}")
            results = ((claim["status"].get("allocation") or {}).get("devices") or {}).get(
                "results"
            ) or []
            if any(r.get("driver") == self.driver for r in results):
                refs.append((namespace, claim["metadata"]["uid"], name))
        return refs

    def start_pod(
        self, api: Objects, pod: Mapping[str, Any], cdi_dir: Path
    ) -> dict[str, ContainerEdits]:
        """Prepare the pod's claims and resolve each container's CDI devices, as the
        kubelet and the container runtime do before starting the containers."""
        refs = self.pod_claims(api, pod)
        prepared = self.prepare(refs)
        by_name = {name: uid for _, uid, name in refs}
        names = claim_names(pod)
        edits: dict[str, ContainerEdits] = {}
        for container in pod["spec"]["containers"]:
            ids: list[str] = []
            for entry, wanted in container_claim_uses(pod, container):
                uid = by_name.get(names.get(entry) or "")
                if uid is None:
                    continue
                for device in prepared[uid].devices:
                    if wanted and wanted not in device["request_names"]:
                        continue
                    ids.extend(i for i in device["cdi_device_ids"] if i not in ids)
            edits[container["name"]] = container_edits(cdi_dir, ids)
        return edits

    def stop_pod(self, api: Objects, pod: Mapping[str, Any]) -> None:
        """Unprepare the pod's claims, as the kubelet does once its containers are gone."""
        self.unprepare(self.pod_claims(api, pod))

    def watch_health(self) -> Any:
        """The NodeWatchResources stream; call `.cancel()` on it when done."""
        plugin = self._plugin()
        ch = pluginclient.channel(plugin.endpoint)
        return pluginclient.watch_health(ch)


def validate_info(info: Any, driver: str) -> str:
    """What the kubelet refuses in PluginInfo ("" when acceptable)."""
    if info.type != protocol.PLUGIN_TYPE:
        return f"type {info.type!r} is not {protocol.PLUGIN_TYPE}"
    if info.name != driver:
        return f"name {info.name!r} is not the expected driver {driver!r}"
    if not Path(info.endpoint).is_socket():
        return f"endpoint {info.endpoint!r} is not a socket"
    versions = set(info.supported_versions)
    if not versions & {"v1.DRAPlugin", "v1beta1.DRAPlugin"}:
        return f"supported_versions {sorted(versions)} has no DRA version the kubelet speaks"
    return ""


def container_edits(cdi_dir: Path, device_ids: Sequence[str]) -> ContainerEdits:
    """Resolve fully qualified CDI device ids against the specs in `cdi_dir`, as a runtime does."""
    specs = [json.loads(p.read_text()) for p in sorted(cdi_dir.glob("*.json"))]
    edits = ContainerEdits()
    for device_id in device_ids:
        kind, _, name = device_id.partition("=")
        matches = [
            d
            for spec in specs
            if spec.get("kind") == kind
            for d in spec.get("devices") or []
            if d.get("name") == name
        ]
        if len(matches) != 1:
            raise KubeletError(f"CDI device {device_id}: {len(matches)} definitions in {cdi_dir}")
        container = matches[0].get("containerEdits") or {}
        for item in container.get("env") or []:
            key, _, value = item.partition("=")
            edits.env[key] = value
        edits.mounts.extend(container.get("mounts") or [])
    return edits
