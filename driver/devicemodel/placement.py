"""Where a node sits, and how to find it when its flags do not say: from the
UltraServer objects.

Uses the same spec parsing and node mapping as the controller, so the daemon
and the controller can never disagree about which server a node runs. Pure;
the caller fetches the objects.
"""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from driver.devicemodel.nodemap import map_nodes
from driver.devicemodel.ultraserver import SpecError, parse_spec
from simdevice.topology import RackSpec


@dataclass(frozen=True)
class NodePlace:
    """Where a node sits: its rack (UltraServer) and server index in it."""

    node_name: str
    ultraserver: str
    server_index: int
    rack: RackSpec


class PlacementError(LookupError):
    """No UltraServer maps the node (yet)."""


def find_place(
    node: str,
    labels: Mapping[str, str],
    ultraservers: Iterable[Mapping[str, Any]],
    only: str = "",
) -> tuple[str, int, RackSpec]:
    """(UltraServer name, server index, rack) of `node`, whose labels are `labels`.

    `only` restricts the search to one UltraServer. Objects whose spec is
    invalid are skipped (the controller reports them in their status).
    """
    for obj in ultraservers:
        try:
            spec = parse_spec(obj)
        except SpecError:
            continue
        if only and spec.name != only:
            continue
        mapping = map_nodes(spec, {node: labels})
        for server, name in mapping.nodes.items():
            if name == node:
                return spec.name, server, spec.rack
    where = f"UltraServer {only}" if only else "any UltraServer"
    raise PlacementError(
        f"--node: {node} is not mapped by {where} (spec.nodes.names, or spec.nodes.selector "
        f"with a server index label); add it there or pass --node {node}=SERVER_INDEX"
    )
