"""Which node runs which server of an UltraServer.

Pure: a parsed spec and the current nodes in, server -> node out. What the
spec cannot see (labels on nodes, nodes that do not exist) becomes a reason
in status, never an exception. The controller and the node daemon share it,
so they can never disagree about which server a node runs.
"""

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from driver.devicemodel.ultraserver import UltraServerSpec
from driver.jsontypes import JSON

HOSTNAME_LABEL: Final = "kubernetes.io/hostname"


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
    # `Lt` rather than `In` with every index: the scheduler parses this selector
    # for every node and pod, and validates each value of an `In`.
    exprs = _selector_expressions(spec.selector)
    exprs.append({"key": spec.server_index_label, "operator": "Lt", "values": [str(servers)]})
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
