"""What the operator reads, as plain values: workloads, the UltraServers found
in the driver's ResourceSlices with the health and use of their nodes, and
the allocations the NeuronUltraServers hold. Pure: objects in, values out."""

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from driver.devicemodel.awsprofile import (
    EFA_DEVICE,
    INSTANCE_TYPES,
    ULTRASERVER_LABEL_PREFIX,
    WORKLOAD_ID_LABEL,
)
from driver.usoperator.health import UNPUBLISHED, device_problem, node_problem
from driver.usoperator.names import STRATEGIES, TOPOLOGY_SIZES


class WorkloadError(ValueError):
    """A workload the operator cannot act on; the message names the field and the fix."""


@dataclass(frozen=True)
class Workload:
    namespace: str
    name: str
    uid: str
    created: str
    instance_type: str
    topology_size: int
    server_count: int
    strategy: str
    template: str
    lnc: int | None
    deleting: bool
    status: Mapping[str, Any]
    finalizers: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def workload_id(self) -> str:
        return workload_id(self.namespace, self.name)


LABEL_VALUE_LIMIT = 63
"""A label value's longest; the id is also a device attribute (64 at most)."""


def workload_id(namespace: str, name: str) -> str:
    """`<namespace>.<name>`, unique in the cluster as a namespace's name has no
    dot; one too long for a label value is cut and ends with a hash of the whole."""
    plain = f"{namespace}.{name}"
    if len(plain) <= LABEL_VALUE_LIMIT:
        return plain
    digest = hashlib.sha256(plain.encode()).hexdigest()[:10]
    return f"{plain[: LABEL_VALUE_LIMIT - 11].rstrip('-.')}-{digest}"


def parse_workload(obj: Mapping[str, Any]) -> Workload:
    """The workload of `obj`; WorkloadError names the first bad field. The CRD's
    schema refuses most of these at create; this is for what it cannot say."""
    meta = obj["metadata"]
    spec = obj.get("spec") or {}
    itype = spec.get("instanceType")
    if not isinstance(itype, str) or not itype:
        raise WorkloadError("spec.instanceType: required, e.g. trn3.48xlarge")
    known = INSTANCE_TYPES.get(itype)
    if known is None or not known.ultraserver:
        choices = ", ".join(sorted(n for n, t in INSTANCE_TYPES.items() if t.ultraserver))
        raise WorkloadError(
            f"spec.instanceType: {itype} is not an UltraServer instance type here; use one of "
            f"{choices}"
        )
    size = spec.get("topologySize")
    if size not in TOPOLOGY_SIZES:
        raise WorkloadError(
            f"spec.topologySize: must be one of {', '.join(map(str, TOPOLOGY_SIZES))}, got {size}"
        )
    count = spec.get("serverCount")
    if type(count) is not int or count < 1:
        raise WorkloadError(f"spec.serverCount: must be 1 or more, got {count}")
    policy = spec.get("allocationPolicy") or {}
    strategy = policy.get("failureStrategy") or "NoOp"
    if strategy not in STRATEGIES:
        raise WorkloadError(
            f"spec.allocationPolicy.failureStrategy: must be one of {', '.join(STRATEGIES)}, "
            f"got {strategy}"
        )
    template = (spec.get("resourceClaimTemplate") or {}).get("name") or meta["name"]
    lnc = (spec.get("config") or {}).get("logicalNeuronCore")
    return Workload(
        namespace=meta["namespace"],
        name=meta["name"],
        uid=meta.get("uid", ""),
        created=meta.get("creationTimestamp", ""),
        instance_type=itype,
        topology_size=int(size),
        server_count=count,
        strategy="MigrateAffected" if strategy == "ReplaceAffected" else strategy,
        template=template,
        lnc=lnc,
        deleting=bool(meta.get("deletionTimestamp")),
        status=obj.get("status") or {},
        finalizers=tuple(meta.get("finalizers") or ()),
    )


@dataclass(frozen=True)
class MemberNode:
    """One node of an UltraServer as the operator sees it."""

    name: str
    groups: Mapping[int, str]
    """Topology size -> the node's group of that size (its pair, its quad; itself for 1)."""
    problem: str
    """Why the node cannot run a workload now; empty when it is healthy."""
    busy: bool
    """Claims that are not a workload's hold some of its devices."""

    @property
    def healthy(self) -> bool:
        return not self.problem


@dataclass(frozen=True)
class UltraServer:
    id: str
    """The capacity block id its nodes' devices carry (`capacityBlockId`)."""
    instance_type: str
    nodes: tuple[MemberNode, ...]

    @property
    def healthy(self) -> bool:
        return all(n.healthy for n in self.nodes)


def _attribute(device: Mapping[str, Any], name: str) -> Any:
    value = (device.get("attributes") or {}).get(name) or {}
    return next(iter(value.values()), None) if isinstance(value, Mapping) else None


def discover(
    slices: Iterable[Mapping[str, Any]],
    nodes: Mapping[str, Mapping[str, Any]],
    busy_nodes: Iterable[str],
    driver: str,
    *,
    known: Mapping[str, tuple[str, Sequence[str]]] | None = None,
    silent: Mapping[str, str] | None = None,
) -> dict[str, UltraServer]:
    """UltraServers by capacity block id, from the driver's per-node slices: a
    node belongs to the UltraServer its devices name. `known` (id -> instance
    type and nodes, what the NeuronUltraServers recorded) keeps a node whose
    devices vanished while its Node remains; `silent` names the nodes whose
    daemon stopped. Why a node is unhealthy: driver/usoperator/health.py."""
    members: dict[str, dict[str, str]] = {}
    tainted: dict[str, str] = {}
    busy = set(busy_nodes)
    for s in slices:
        spec = s.get("spec") or {}
        node = spec.get("nodeName")
        if spec.get("driver") != driver or not node:
            continue
        for device in spec.get("devices") or []:
            block = _attribute(device, "capacityBlockId")
            if block is None or _attribute(device, "resourceType") == EFA_DEVICE:
                continue
            members.setdefault(str(block), {})[node] = str(_attribute(device, "instanceType"))
            if node not in tainted:
                tainted[node] = device_problem(device)
    published = {n for by_node in members.values() for n in by_node}
    for block, (itype, names) in (known or {}).items():
        for name in names:
            if name not in published and name in nodes:
                members.setdefault(block, {})[name] = itype
    found = {}
    for block, by_node in sorted(members.items()):
        itype = next(iter(by_node.values()))
        member_nodes = tuple(
            MemberNode(
                name=name,
                groups=_groups(name, nodes.get(name)),
                problem=node_problem(nodes.get(name))
                or (silent or {}).get(name, "")
                or ("" if name in published else UNPUBLISHED)
                or tainted.get(name, ""),
                busy=name in busy,
            )
            for name in sorted(by_node)
        )
        found[block] = UltraServer(block, itype, member_nodes)
    return found


def known_members(objects: Iterable[Mapping[str, Any]]) -> dict[str, tuple[str, list[str]]]:
    """UltraServer id -> its instance type and nodes, as its NeuronUltraServer records them."""
    return {
        o["metadata"]["name"]: (
            str((o.get("spec") or {}).get("instanceType")),
            [str(n) for n in (o.get("spec") or {}).get("nodes") or ()],
        )
        for o in objects
    }


def _groups(name: str, node: Mapping[str, Any] | None) -> dict[int, str]:
    labels = ((node or {}).get("metadata") or {}).get("labels") or {}
    groups = {1: name}
    for size in TOPOLOGY_SIZES[1:]:
        value = labels.get(f"{ULTRASERVER_LABEL_PREFIX}{size}")
        if value:
            groups[size] = str(value)
    return groups


def busy_nodes(claims: Iterable[Mapping[str, Any]], driver: str) -> set[str]:
    """Nodes some of whose devices claims hold that no workload made: a workload
    never gets such a node (in the AWS profile a pool is a node)."""
    out = set()
    for claim in claims:
        if WORKLOAD_ID_LABEL in ((claim.get("metadata") or {}).get("labels") or {}):
            continue
        allocation = (claim.get("status") or {}).get("allocation") or {}
        for result in (allocation.get("devices") or {}).get("results") or []:
            if result.get("driver") == driver:
                out.add(str(result.get("pool")))
    return out


@dataclass(frozen=True)
class Held:
    """Nodes of one UltraServer a workload holds."""

    workload: str
    """namespace/name"""
    workload_id: str
    ultraserver: str
    nodes: tuple[str, ...]


def held_from(objects: Iterable[Mapping[str, Any]]) -> list[Held]:
    """The allocations recorded in the NeuronUltraServers' statuses: the operator's
    memory, so a restart loses nothing."""
    out = []
    for obj in objects:
        name = obj["metadata"]["name"]
        for entry in (obj.get("status") or {}).get("allocations") or []:
            out.append(
                Held(
                    str(entry["workload"]),
                    str(entry["workloadId"]),
                    name,
                    tuple(str(n) for n in entry.get("nodes") or ()),
                )
            )
    return out


def workload_pods(
    pods: Iterable[Mapping[str, Any]], namespace: str, template: str
) -> list[Mapping[str, Any]]:
    """Pods of `namespace` that take a claim from the workload's template."""
    return [
        p
        for p in pods
        if p["metadata"].get("namespace") == namespace
        and any(
            c.get("resourceClaimTemplateName") == template
            for c in (p.get("spec") or {}).get("resourceClaims") or ()
        )
    ]


def node_names(held: Sequence[Held]) -> set[str]:
    return {n for h in held for n in h.nodes}
