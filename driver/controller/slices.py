"""The desired ResourceSlices (resource.k8s.io/v1) of one rack: a pure function
of its layout, its node mapping and its device taints.

One pool per rack, named after the UltraServer. Partitioned mode publishes
counter-only slices (allNodes), one or more slices per node, and one slice
holding the rack device (its node selector lists every node of the rack);
flat mode publishes per-node slices of chips or cores without counters.
`pool.generation` is left at 0 here: the reconciler decides it.
"""

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from driver.devicemodel import attributes
from driver.devicemodel.fabric import FABRIC_FAILED, FABRIC_KINDS, FABRIC_READY
from driver.devicemodel.layout import Layout, PlannedDevice, build_layout, flat_devices
from driver.devicemodel.naming import server_name
from driver.jsontypes import JSON
from driver.names import rack_label
from simdevice.topology import RackSpec

MAX_DEVICES_PER_SLICE: Final = 64
"""ResourceSliceMaxDevicesWithAdvancedFeatures: the cap once any device
consumes counters or carries taints (k8s.io/api resource/v1)."""
MAX_COUNTER_SETS_PER_SLICE: Final = 8
MAX_ATTRIBUTES_AND_CAPACITIES: Final = 32

MANAGED_BY_LABEL: Final = "app.kubernetes.io/managed-by"
MANAGED_BY: Final = "trainium-dra-controller"

Taint = Mapping[str, str]


@dataclass(frozen=True)
class RackInput:
    """Everything the builder needs to know about one rack."""

    name: str  # UltraServer name: the pool name and ultraserverId
    rack: RackSpec
    mode: str  # partitioned | flat
    flat_device: str  # chip | core (flat mode only)
    nodes: Mapping[int, str]  # server index -> node name, only servers with a node
    rack_nodes: JSON | None  # node selector matching exactly the rack's nodes, if known
    driver: str
    taints: Mapping[str, Sequence[Taint]]  # device name -> taints
    binding_conditions: bool  # server and ultraserver devices wait for their fabric


def planned_devices(rack: RackSpec, mode: str, flat_device: str) -> tuple[PlannedDevice, ...]:
    """All devices the rack could publish in `mode`, whether or not their nodes exist."""
    return build_layout(rack).devices if mode == "partitioned" else flat_devices(rack, flat_device)


def build_slices(inp: RackInput) -> list[JSON]:
    """The rack's ResourceSlices, sorted by name (the allocator's order)."""
    named = _partitioned(inp, build_layout(inp.rack)) if inp.mode == "partitioned" else _flat(inp)
    slices = [_slice(inp, suffix, spec) for suffix, spec in named]
    for s in slices:
        s["spec"]["pool"]["resourceSliceCount"] = len(slices)
    return sorted(slices, key=lambda s: str(s["metadata"]["name"]))


def slice_name(driver: str, rack_name: str, suffix: str) -> str:
    """`<rack>.<part>.<driver>`: every DNS label stays short, and the rack's
    slices sort counters first, then servers in order, then the rack device."""
    return f"{rack_name}.{suffix}.{driver}"


def _slice(inp: RackInput, suffix: str, spec: JSON) -> JSON:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {
            "name": slice_name(inp.driver, inp.name, suffix),
            "labels": {rack_label(inp.driver): inp.name, MANAGED_BY_LABEL: MANAGED_BY},
        },
        "spec": {
            "driver": inp.driver,
            "pool": {"name": inp.name, "generation": 0, "resourceSliceCount": 0},
            **spec,
        },
    }


def _partitioned(inp: RackInput, layout: Layout) -> list[tuple[str, JSON]]:
    out: list[tuple[str, JSON]] = []
    sets = layout.counter_sets()
    for i in range(0, len(sets), MAX_COUNTER_SETS_PER_SLICE):
        chunk = sets[i : i + MAX_COUNTER_SETS_PER_SLICE]
        out.append(
            (
                f"counters-{i // MAX_COUNTER_SETS_PER_SLICE}",
                {
                    "allNodes": True,
                    "sharedCounters": [
                        {
                            "name": name,
                            "counters": {c: {"value": str(v)} for c, v in counters.items()},
                        }
                        for name, counters in chunk
                    ],
                },
            )
        )
    by_server: dict[int, list[PlannedDevice]] = {}
    for device in layout.devices:
        if device.server is not None:
            by_server.setdefault(device.server, []).append(device)
    for server, node in sorted(inp.nodes.items()):
        devices = by_server[server]
        groups = [g for g in layout.groups if g.server == server]
        for group in groups:
            members = [
                d
                for d in devices
                if d.kind in ("core", "chip") and d.chips[0].local_index in group.chips
            ]
            if group == groups[-1]:
                members += [d for d in devices if d.kind == "server"]
            out.append((group.name, {**only_node(node), "devices": _devices(inp, members)}))
    if len(inp.nodes) == inp.rack.servers and inp.rack_nodes is not None:
        rack_device = layout.devices[-1]
        out.append(
            (
                "ultraserver",
                {"nodeSelector": inp.rack_nodes, "devices": _devices(inp, [rack_device])},
            )
        )
    return out


def _flat(inp: RackInput) -> list[tuple[str, JSON]]:
    devices = flat_devices(inp.rack, inp.flat_device)
    out: list[tuple[str, JSON]] = []
    for server, node in sorted(inp.nodes.items()):
        mine = [d for d in devices if d.server == server]
        chunks = [
            mine[i : i + MAX_DEVICES_PER_SLICE] for i in range(0, len(mine), MAX_DEVICES_PER_SLICE)
        ]
        for i, chunk in enumerate(chunks):
            suffix = server_name(server) if len(chunks) == 1 else f"{server_name(server)}-{i}"
            out.append((suffix, {**only_node(node), "devices": _devices(inp, chunk)}))
    return out


def only_node(node: str) -> JSON:
    """Select one node by name without `spec.nodeName`: the kubelet deletes every
    slice whose nodeName is its node when it starts and after a plugin leaves,
    and these slices are the controller's, not the kubelet's plugin's."""
    term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
    return {"nodeSelector": {"nodeSelectorTerms": [term]}}


def _devices(inp: RackInput, devices: Iterable[PlannedDevice]) -> list[JSON]:
    return [device_entry(inp, d) for d in devices]


def device_entry(inp: RackInput, device: PlannedDevice) -> JSON:
    """One `spec.devices[]` entry: attributes a newcomer can read, capacities, counters, taints."""
    rack, places = inp.rack, device.chips
    attrs: dict[str, JSON] = {
        attributes.KIND: {"string": device.kind},
        attributes.ULTRASERVER: {"string": inp.name},
        "generation": {"string": rack.generation},
        "coreVersion": {"string": rack.chip.core_version},
        attributes.CORE_START: {"int": device.core_start},
        attributes.CORE_COUNT: {"int": device.core_count},
    }
    if device.server is not None:
        attrs[attributes.SERVER_INDEX] = {"int": device.server}
    if len(places) == 1:
        attrs[attributes.CHIP_INDEX] = {"int": places[0].local_index}
        attrs["rackChipIndex"] = {"int": places[0].index}
        if device.kind == "core" and device.core_count <= rack.chip.cores_per_chiplet:
            attrs["chiplet"] = {"int": rack.chip.chiplet_of(device.core_start)}
    for level, layer in enumerate(_common(p.network_node_layers for p in places), start=1):
        attrs[f"networkNodeLayer{level}"] = {"string": layer}
    for size in sorted(places[0].group_ids):
        ids = {p.group_ids[size] for p in places}
        if len(ids) == 1:
            attrs[f"devicegroup{size}_id"] = {"int": ids.pop()}
    hbm = rack.chip.hbm_bytes * device.core_count // rack.chip.cores
    entry: JSON = {
        "name": device.name,
        "attributes": attrs,
        "capacity": {"cores": {"value": str(device.core_count)}, "hbm": {"value": str(hbm)}},
    }
    if device.consumes:
        entry["consumesCounters"] = [
            {
                "counterSet": c.counter_set,
                "counters": {k: {"value": str(v)} for k, v in c.counters.items()},
            }
            for c in device.consumes
        ]
    taints = inp.taints.get(device.name)
    if taints:
        entry["taints"] = [dict(t) for t in taints]
    if inp.binding_conditions and device.kind in FABRIC_KINDS:
        entry["bindingConditions"] = [FABRIC_READY]
        entry["bindingFailureConditions"] = [FABRIC_FAILED]
    return entry


def _common(layers: Iterable[tuple[str, ...]]) -> list[str]:
    """The leading switch layers every chip of a device shares."""
    rows = list(layers)
    out: list[str] = []
    for level in zip(*rows, strict=True):
        if len(set(level)) != 1:
            break
        out.append(level[0])
    return out
