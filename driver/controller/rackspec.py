"""An UltraServer object's spec, checked and typed, and its node mapping.

Pure: the object and the current nodes in, a RackSpec plus server -> node out.
The CRD schema refuses most bad input; what it cannot see (labels on nodes,
nodes that do not exist) becomes a reason in status, never an exception.
"""

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from simdevice.topology import RackSpec, TopologyError, rack_spec

DEFAULT_SERVER_INDEX_LABEL: Final = "trainium.sim.dev/server-index"
HOSTNAME_LABEL: Final = "kubernetes.io/hostname"
MODES: Final = ("partitioned", "flat")
FLAT_DEVICES: Final = ("chip", "core")
DEFAULT_LNC: Final = {"trainium3": 1, "trainium2": 2}

JSON = dict[str, Any]


class SpecError(ValueError):
    """The spec cannot be published; the message starts with the field and says the fix."""


@dataclass(frozen=True)
class UltraServerSpec:
    name: str
    uid: str
    generation: int  # metadata.generation
    rack: RackSpec
    mode: str
    flat_device: str
    default_lnc: int
    node_names: tuple[str, ...] | None  # explicit mapping, server-ordered
    selector: JSON | None  # label selector mapping
    server_index_label: str


def parse_spec(obj: Mapping[str, Any]) -> UltraServerSpec:
    """Typed view of an UltraServer; SpecError names the field and the fix."""
    meta = obj.get("metadata", {})
    spec = obj.get("spec") or {}
    try:
        rack = rack_spec(str(spec.get("generation")))
    except TopologyError as err:
        raise SpecError(f"spec.{err}") from err
    mode = spec.get("mode", "partitioned")
    if mode not in MODES:
        raise SpecError(f"spec.mode: {mode!r} is not one of {', '.join(MODES)}")
    flat_device = spec.get("flatDevice", "chip")
    if flat_device not in FLAT_DEVICES:
        raise SpecError(f"spec.flatDevice: {flat_device!r} is not one of {', '.join(FLAT_DEVICES)}")
    lnc = int(spec.get("defaultLogicalNeuronCore") or DEFAULT_LNC.get(rack.chip.name, 1))
    nodes = spec.get("nodes") or {}
    names = nodes.get("names")
    selector = nodes.get("selector")
    if (names is None) == (selector is None):
        raise SpecError("spec.nodes: set exactly one of names or selector")
    if names is not None and len(names) != rack.servers:
        raise SpecError(
            f"spec.nodes.names: {rack.generation} has {rack.servers} servers but "
            f"{len(names)} names are listed; list one node per server"
        )
    if names is not None and len(set(names)) != len(names):
        raise SpecError("spec.nodes.names: a node is listed twice; list each node once")
    return UltraServerSpec(
        name=str(meta["name"]),
        uid=str(meta.get("uid", "")),
        generation=int(meta.get("generation", 0)),
        rack=rack,
        mode=mode,
        flat_device=flat_device,
        default_lnc=lnc,
        node_names=tuple(names) if names is not None else None,
        selector=dict(selector) if selector is not None else None,
        server_index_label=str(nodes.get("serverIndexLabel", DEFAULT_SERVER_INDEX_LABEL)),
    )


@dataclass(frozen=True)
class NodeMapping:
    """Which node runs which server, and why some servers have none."""

    nodes: dict[int, str] = field(default_factory=dict)
    missing: dict[int, str] = field(default_factory=dict)  # server -> reason
    rack_nodes: JSON | None = None  # one-term node selector for the rack device
    rack_problem: str | None = None  # why the rack device cannot be published

    def summary(self, servers: int) -> str:
        return f"{len(self.nodes)}/{servers}"


def map_nodes(spec: UltraServerSpec, nodes: Mapping[str, Mapping[str, str]]) -> NodeMapping:
    """Resolve servers to existing nodes. `nodes` maps node name -> labels."""
    servers = spec.rack.servers
    if spec.node_names is not None:
        mapped = {i: n for i, n in enumerate(spec.node_names) if n in nodes}
        missing = {
            i: f"node {n} not found" for i, n in enumerate(spec.node_names) if n not in nodes
        }
        if missing:
            return NodeMapping(mapped, missing)
        unlabeled = sorted(n for n in mapped.values() if not nodes[n].get(HOSTNAME_LABEL))
        if unlabeled:
            problem = f"nodes {', '.join(unlabeled)} lack label {HOSTNAME_LABEL}"
            return NodeMapping(mapped, {}, None, problem)
        hostnames = sorted({nodes[n][HOSTNAME_LABEL] for n in mapped.values()})
        return NodeMapping(
            mapped, {}, _term([{"key": HOSTNAME_LABEL, "operator": "In", "values": hostnames}])
        )
    assert spec.selector is not None
    claims: dict[int, list[str]] = {}
    for name, labels in nodes.items():
        if not selector_matches(spec.selector, labels):
            continue
        raw = labels.get(spec.server_index_label)
        if raw is None or not raw.isdigit() or int(raw) >= servers:
            continue
        claims.setdefault(int(raw), []).append(name)
    mapped, missing = {}, {}
    for server in range(servers):
        owners = sorted(claims.get(server, []))
        if len(owners) == 1:
            mapped[server] = owners[0]
        elif owners:
            missing[server] = f"nodes {', '.join(owners)} all claim server {server}"
        else:
            missing[server] = f"no node with label {spec.server_index_label}={server}"
    exprs = _selector_expressions(spec.selector)
    exprs.append(
        {
            "key": spec.server_index_label,
            "operator": "In",
            "values": [str(s) for s in range(servers)],
        }
    )
    return NodeMapping(mapped, missing, None if missing else _term(exprs))


def _term(expressions: list[JSON]) -> JSON:
    return {"nodeSelectorTerms": [{"matchExpressions": expressions}]}


def _selector_expressions(selector: Mapping[str, Any]) -> list[JSON]:
    """A label selector as node selector expressions (same semantics)."""
    exprs: list[JSON] = [
        {"key": k, "operator": "In", "values": [v]}
        for k, v in sorted((selector.get("matchLabels") or {}).items())
    ]
    for e in selector.get("matchExpressions") or []:
        item: JSON = {"key": e["key"], "operator": e["operator"]}
        if e["operator"] in ("In", "NotIn"):
            item["values"] = list(e.get("values") or [])
        exprs.append(item)
    return exprs


def selector_matches(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """Label selector semantics of metav1.LabelSelector."""
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for e in selector.get("matchExpressions") or []:
        key, op, values = e["key"], e["operator"], e.get("values") or []
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and key in labels and labels[key] in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True
