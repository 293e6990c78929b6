"""An UltraServer object's spec, checked and typed.

Pure: the object in, an `UltraServerSpec` out. The CRD schema refuses most
bad input; what it cannot see becomes a `SpecError` naming the field.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from driver.jsontypes import JSON
from simdevice.topology import RackSpec, TopologyError, rack_spec

DEFAULT_SERVER_INDEX_LABEL: Final = "trainium.sim.dev/server-index"
MODES: Final = ("partitioned", "flat")
FLAT_DEVICES: Final = ("chip", "core")
DEFAULT_LNC: Final = {"trainium3": 1, "trainium2": 2}


class SpecError(ValueError):
    """The spec cannot be published; the message starts with the field and says the fix."""


@dataclass(frozen=True)
class FabricSpec:
    """The simulated NeuronLink/EFA fabric of a rack (docs/device-model.md)."""

    binding_conditions: bool = True
    setup_seconds: float = 1.0
    failed_servers: frozenset[int] = frozenset()


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
    fabric: FabricSpec


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
    fabric = parse_fabric(spec.get("fabric") or {}, rack)
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
        fabric=fabric,
    )


def parse_fabric(fabric: Mapping[str, Any], rack: RackSpec) -> FabricSpec:
    default = FabricSpec()
    setup = fabric.get("setupSeconds", default.setup_seconds)
    if not isinstance(setup, int | float) or isinstance(setup, bool) or not 0 <= setup <= 600:
        raise SpecError(f"spec.fabric.setupSeconds: {setup!r} is not a number from 0 to 600")
    failed = fabric.get("failedServers") or []
    bad = [s for s in failed if not isinstance(s, int) or not 0 <= s < rack.servers]
    if bad:
        raise SpecError(
            f"spec.fabric.failedServers: {bad} are not server indexes of {rack.generation} "
            f"(0 to {rack.servers - 1})"
        )
    return FabricSpec(
        binding_conditions=bool(fabric.get("bindingConditions", default.binding_conditions)),
        setup_seconds=float(setup),
        failed_servers=frozenset(failed),
    )
