"""An UltraServer object's spec, checked and typed.

Pure: the object in, an `UltraServerSpec` out. The CRD schema refuses most
bad input; what it cannot see becomes a `SpecError` naming the field.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from driver.devicemodel.awsprofile import ProfileError, instance_type
from driver.devicemodel.layout import DEFAULT_OPTIONS, PARTITION_SIZES, POOL_LAYOUTS, LayoutOptions
from driver.jsontypes import JSON
from simdevice.topology import VALID_LNC, RackSpec, TopologyError, rack_spec

DEFAULT_SERVER_INDEX_LABEL: Final = "trainium.sim.dev/server-index"
DEVICE_MODES: Final = ("partitioned", "flat")
"""`spec.mode`: which devices a rack publishes (not AWS's `ultraserverMode`)."""
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
    object_generation: int
    """The object's metadata.generation (the hardware's is `rack.generation`)."""
    rack: RackSpec
    mode: str  # spec.mode, one of DEVICE_MODES
    flat_device: str
    default_lnc: int
    node_names: tuple[str, ...] | None  # explicit mapping, server-ordered
    selector: JSON | None  # label selector mapping
    server_index_label: str
    fabric: FabricSpec
    layout: LayoutOptions = DEFAULT_OPTIONS  # partitioned mode
    instance_type: str | None = None  # the AWS profile's EC2 instance type of the nodes


def parse_spec(obj: Mapping[str, Any]) -> UltraServerSpec:
    """Typed view of an UltraServer; SpecError names the field and the fix."""
    meta = obj.get("metadata", {})
    spec = _object(obj.get("spec"), "spec")
    try:
        rack = rack_spec(str(spec.get("generation")))
    except TopologyError as err:
        raise SpecError(f"spec.{err}") from err
    mode = spec.get("mode", "partitioned")
    if mode not in DEVICE_MODES:
        raise SpecError(f"spec.mode: {mode!r} is not one of {', '.join(DEVICE_MODES)}")
    flat_device = spec.get("flatDevice", "chip")
    if flat_device not in FLAT_DEVICES:
        raise SpecError(f"spec.flatDevice: {flat_device!r} is not one of {', '.join(FLAT_DEVICES)}")
    pools = spec.get("pools", "rack")
    if pools not in POOL_LAYOUTS:
        raise SpecError(f"spec.pools: {pools!r} is not one of {', '.join(POOL_LAYOUTS)}")
    if pools != "rack" and mode != "partitioned":
        raise SpecError(f"spec.pools: {pools!r} applies to mode partitioned only; remove it")
    sizes = spec.get("partitionSizes", list(PARTITION_SIZES))
    if (
        not isinstance(sizes, list)
        or not all(type(n) is int and n in PARTITION_SIZES for n in sizes)
        or len(set(sizes)) != len(sizes)
    ):
        raise SpecError(
            f"spec.partitionSizes: {sizes!r} must list distinct core counts out of "
            f"{', '.join(map(str, PARTITION_SIZES))} (whole chips are always published)"
        )
    lnc = spec.get("defaultLogicalNeuronCore") or DEFAULT_LNC.get(rack.chip.name, 1)
    if type(lnc) is not int or lnc not in VALID_LNC:
        raise SpecError(
            f"spec.defaultLogicalNeuronCore: {lnc!r} is not one of {', '.join(map(str, VALID_LNC))}"
        )
    nodes = _object(spec.get("nodes"), "spec.nodes")
    names = nodes.get("names")
    selector = nodes.get("selector")
    if (names is None) == (selector is None):
        raise SpecError("spec.nodes: set exactly one of names or selector")
    if names is not None and (
        not isinstance(names, list) or not all(isinstance(n, str) and n for n in names)
    ):
        raise SpecError("spec.nodes.names: must be a list of node names, one per server")
    if names is not None and len(names) != rack.servers:
        raise SpecError(
            f"spec.nodes.names: {rack.generation} has {rack.servers} servers but "
            f"{len(names)} names are listed; list one node per server"
        )
    if names is not None and len(set(names)) != len(names):
        raise SpecError("spec.nodes.names: a node is listed twice; list each node once")
    if selector is not None and not isinstance(selector, Mapping):
        raise SpecError("spec.nodes.selector: must be a label selector (matchLabels, ...)")
    index_label = nodes.get("serverIndexLabel", DEFAULT_SERVER_INDEX_LABEL)
    if not isinstance(index_label, str) or not index_label:
        raise SpecError(f"spec.nodes.serverIndexLabel: {index_label!r} is not a label name")
    fabric = parse_fabric(_object(spec.get("fabric"), "spec.fabric"), rack)
    itype = spec.get("instanceType")
    if itype is not None:
        try:
            instance_type(rack.generation, itype if isinstance(itype, str) else repr(itype))
        except ProfileError as err:
            raise SpecError(str(err)) from err
    return UltraServerSpec(
        name=str(meta["name"]),
        uid=str(meta.get("uid", "")),
        object_generation=int(meta.get("generation", 0)),
        rack=rack,
        mode=mode,
        flat_device=flat_device,
        default_lnc=lnc,
        node_names=tuple(names) if names is not None else None,
        selector=dict(selector) if selector is not None else None,
        server_index_label=index_label,
        fabric=fabric,
        layout=LayoutOptions(pools, tuple(sorted(sizes))),
        instance_type=itype,
    )


def _object(value: Any, field: str) -> Mapping[str, Any]:
    """An optional object field: absent or null is empty, anything else is refused."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise SpecError(f"{field}: must be an object, got {type(value).__name__}")
    return value


def parse_fabric(fabric: Mapping[str, Any], rack: RackSpec) -> FabricSpec:
    default = FabricSpec()
    setup = fabric.get("setupSeconds", default.setup_seconds)
    if not isinstance(setup, int | float) or isinstance(setup, bool) or not 0 <= setup <= 600:
        raise SpecError(f"spec.fabric.setupSeconds: {setup!r} is not a number from 0 to 600")
    failed = fabric.get("failedServers") or []
    if not isinstance(failed, list):
        raise SpecError(
            f"spec.fabric.failedServers: must be a list of server indexes of {rack.generation}"
        )
    bad = [s for s in failed if type(s) is not int or not 0 <= s < rack.servers]
    if bad:
        raise SpecError(
            f"spec.fabric.failedServers: {bad} are not server indexes of {rack.generation} "
            f"(0 to {rack.servers - 1})"
        )
    binding = fabric.get("bindingConditions", default.binding_conditions)
    if not isinstance(binding, bool):
        raise SpecError(f"spec.fabric.bindingConditions: must be true or false, got {binding!r}")
    return FabricSpec(
        binding_conditions=binding,
        setup_seconds=float(setup),
        failed_servers=frozenset(failed),
    )
