"""What one rack publishes, pool by pool: a pure function of its layout, its
node mapping and its device taints. Each pool's plan lists its slices, each
slice as plain data (the node it is for or its node selector, its devices
with attributes, capacity, counters consumed, taints and binding conditions,
or its counter sets); the controller only wraps each into a ResourceSlice
(driver/controller/slices.py).

Partitioned mode has three pool layouts. `rack`: one pool named after the
UltraServer, with counter-only slices (allNodes), one or more slices per node
and one slice holding the rack device (its node selector lists every node of
the rack). `node`: a pool per server, `<rack>/<server>`, whose counter and
device slices name the node (`spec.nodeName`, which the scheduler indexes by
node), and the rack's own pool holding only the rack device. `server`: the
`node` layout's server pools, no rack device. Flat mode publishes per-node
slices of chips or cores without counters, in the rack's pool. The AWS
profile publishes a pool per node, named after the node, in AWS's vocabulary
(awsprofile.py), each device of a node that AWS's UltraServer operator
allocated carrying its `workloadId` (driver/controller/workloadtags.py).
With `order` publishing, each partitioned slice lists the devices the
allocated ones block after the free ones. Devices `withheld` are left out of
their slices, each slice kept (the scheduler benchmark's availability arms;
blocking.py).
"""

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Final

from driver.devicemodel import attributes
from driver.devicemodel.awsprofile import (
    COUNTER_SET,
    NEURON_DEVICE,
    NEURON_NODE,
    AwsDevice,
    AwsVersions,
    InstanceType,
    node_devices,
)
from driver.devicemodel.awsprofile import chip_name as aws_chip_name
from driver.devicemodel.blocking import device_order
from driver.devicemodel.fabric import FABRIC_FAILED, FABRIC_KINDS, FABRIC_READY
from driver.devicemodel.layout import (
    DEFAULT_OPTIONS,
    SERVER_POOL_LAYOUTS,
    Layout,
    LayoutOptions,
    PlannedDevice,
    build_layout,
    flat_devices,
)
from driver.devicemodel.naming import chip_name, server_name, server_pool
from driver.devicemodel.rackguard import RACK_EXCLUSIVE, RACK_IN_USE
from driver.jsontypes import JSON
from simdevice.topology import RackSpec

MAX_DEVICES_PER_SLICE: Final = 64
"""ResourceSliceMaxDevicesWithAdvancedFeatures: the cap once any device
consumes counters or carries taints (k8s.io/api resource/v1)."""
MAX_COUNTER_SETS_PER_SLICE: Final = 8

Taint = Mapping[str, str]


@dataclass(frozen=True)
class RackInput:
    """Everything one rack's plan depends on. The driver the slices are written
    for is not here: the plan does not depend on it (driver/controller/slices.py
    names it)."""

    name: str  # UltraServer name: the pool name and ultraserverId
    rack: RackSpec
    mode: str  # partitioned | flat
    flat_device: str  # chip | core (flat mode only)
    nodes: Mapping[int, str]  # server index -> node name, only servers with a node
    rack_nodes: JSON | None  # node selector matching exactly the rack's nodes, if known
    taints: Mapping[str, Sequence[Taint]]  # device name -> taints
    binding_conditions: bool  # server and ultraserver devices wait for their fabric
    layout: LayoutOptions = DEFAULT_OPTIONS  # partitioned mode only
    binding_served: bool = True  # the apiserver keeps binding conditions
    rack_advertised: bool = True  # `node` pools: the rack device is published
    aws: "AwsRack | None" = None  # the AWS profile's instance type and versions
    workloads: Mapping[str, str] = field(default_factory=dict)
    """AWS profile: node name -> the workloadId its devices carry (workloadtags.py)."""
    publishing: str = "plain"  # one of blocking.PUBLISHING (partitioned mode only)
    allocated: frozenset[str] = frozenset()
    """Names of the rack's devices some claim holds, which `order` publishing
    lists blocked devices after (blocking.py)."""
    withheld: frozenset[str] = frozenset()
    """Names of blocked devices left out of their slices (blocking.blocked_devices)."""


@dataclass(frozen=True)
class AwsRack:
    """How the AWS profile describes one rack's nodes."""

    instance_type: InstanceType
    versions: AwsVersions


@dataclass(frozen=True)
class SlicePlan:
    """One slice of a pool: `part` tells it apart from the rack's other slices
    (the controller names it `<rack>.<part>.<driver>`); `spec` is its spec
    but driver and pool: the node it is for (`nodeName`, `nodeSelector` or
    `allNodes`) and its `devices` or `sharedCounters`."""

    part: str
    spec: JSON


@dataclass(frozen=True)
class PoolPlan:
    """One pool of the rack and every slice in it."""

    name: str
    slices: tuple[SlicePlan, ...]


def plan_pools(inp: RackInput) -> list[PoolPlan]:
    """The rack's pools, each with at least one slice."""
    if inp.aws is not None:
        return _aws(inp, inp.aws)
    if inp.mode != "partitioned":
        return _flat(inp)
    if inp.layout.pools in SERVER_POOL_LAYOUTS:
        return _node_pools(inp, _published_layout(inp))
    return _partitioned(inp, _published_layout(inp))


def _published_layout(inp: RackInput) -> Layout:
    """The partitioned layout with its devices in publishing order: each slice
    takes its devices in this order."""
    layout = build_layout(inp.rack, inp.layout)
    if inp.publishing == "order":
        return replace(layout, devices=device_order(layout, inp.allocated))
    if inp.withheld:
        return replace(
            layout, devices=tuple(d for d in layout.devices if d.name not in inp.withheld)
        )
    return layout


def _counter_slices(
    sets: Sequence[tuple[str, Mapping[str, int]]], prefix: str, where: JSON
) -> list[SlicePlan]:
    """Counter-only slices of at most 8 sets each, `<prefix>-<n>`."""
    out: list[SlicePlan] = []
    for i in range(0, len(sets), MAX_COUNTER_SETS_PER_SLICE):
        chunk = sets[i : i + MAX_COUNTER_SETS_PER_SLICE]
        counter_sets = [
            {"name": name, "counters": {c: {"value": str(v)} for c, v in counters.items()}}
            for name, counters in chunk
        ]
        out.append(
            SlicePlan(
                f"{prefix}-{i // MAX_COUNTER_SETS_PER_SLICE}",
                {**where, "sharedCounters": counter_sets},
            )
        )
    return out


def _server_device_slices(
    inp: RackInput, layout: Layout, server: int, where: JSON
) -> list[SlicePlan]:
    """One slice per group of the server: its chips' partitions and chips,
    and the server device after the last group's."""
    devices = [d for d in layout.devices if d.server == server]
    groups = [g for g in layout.groups if g.server == server]
    out: list[SlicePlan] = []
    for group in groups:
        members = [
            d
            for d in devices
            if d.kind in ("core", "chip") and d.chips[0].local_index in group.chips
        ]
        if group == groups[-1]:
            members += [d for d in devices if d.kind == "server"]
        out.append(SlicePlan(group.name, {**where, "devices": _devices(inp, members)}))
    return out


def _rack_device_slice(inp: RackInput, layout: Layout) -> list[SlicePlan]:
    """The rack device, once every server has a node; in the `node` pool
    layout only where binding conditions are kept, as its guard needs them,
    and only while the rack is advertised (docs/device-model.md); never in
    the `server` layout."""
    if len(inp.nodes) != inp.rack.servers or inp.rack_nodes is None:
        return []
    if inp.layout.pools == "server":
        return []
    if inp.layout.pools == "node" and not (inp.binding_served and inp.rack_advertised):
        return []
    rack_device = [d for d in layout.devices if d.kind == "ultraserver"]
    spec = {"nodeSelector": inp.rack_nodes, "devices": _devices(inp, rack_device)}
    return [SlicePlan("ultraserver", spec)]


def _partitioned(inp: RackInput, layout: Layout) -> list[PoolPlan]:
    """One pool for the whole rack."""
    slices = _counter_slices(layout.counter_sets(), "counters", {"allNodes": True})
    for server, node in sorted(inp.nodes.items()):
        slices += _server_device_slices(inp, layout, server, only_node(node))
    slices += _rack_device_slice(inp, layout)
    return [PoolPlan(inp.name, tuple(slices))]


def _node_pools(inp: RackInput, layout: Layout) -> list[PoolPlan]:
    """A pool per server whose slices name their node, then the rack's pool
    (`node` layout only)."""
    out: list[PoolPlan] = []
    for server, node in sorted(inp.nodes.items()):
        where: JSON = {"nodeName": node}
        prefix = f"{server_name(server)}-counters"
        slices = _counter_slices(layout.counter_sets(server), prefix, where)
        slices += _server_device_slices(inp, layout, server, where)
        out.append(PoolPlan(server_pool(inp.name, server), tuple(slices)))
    rack_device = _rack_device_slice(inp, layout)
    if rack_device:
        out.append(PoolPlan(inp.name, tuple(rack_device)))
    return out


def _flat(inp: RackInput) -> list[PoolPlan]:
    """The rack's pool: each node's chips or cores, in slices of at most 64."""
    devices = flat_devices(inp.rack, inp.flat_device)
    slices: list[SlicePlan] = []
    for server, node in sorted(inp.nodes.items()):
        mine = [d for d in devices if d.server == server]
        chunks = [
            mine[i : i + MAX_DEVICES_PER_SLICE] for i in range(0, len(mine), MAX_DEVICES_PER_SLICE)
        ]
        for i, chunk in enumerate(chunks):
            part = server_name(server) if len(chunks) == 1 else f"{server_name(server)}-{i}"
            slices.append(SlicePlan(part, {**only_node(node), "devices": _devices(inp, chunk)}))
    return [PoolPlan(inp.name, tuple(slices))] if slices else []


def _aws(inp: RackInput, aws: AwsRack) -> list[PoolPlan]:
    """A pool per node named after it: on an UltraServer's node a counter slice
    (a counter per chip, which the node device consumes whole), then the
    node's devices."""
    out: list[PoolPlan] = []
    for server, node in sorted(inp.nodes.items()):
        devices = node_devices(
            inp.rack,
            server,
            node,
            aws.instance_type,
            ultraserver_name=inp.name,
            versions=aws.versions,
            workload_id=inp.workloads.get(node),
        )
        where: JSON = {"nodeName": node}
        chips = [d for d in devices if d.resource_type == NEURON_DEVICE]
        slices: list[SlicePlan] = []
        if aws.instance_type.ultraserver:
            counters = {d.name: {"value": "1"} for d in chips}
            spec = {**where, "sharedCounters": [{"name": COUNTER_SET, "counters": counters}]}
            slices.append(SlicePlan(f"{server_name(server)}-counters", spec))
        entries = [_aws_entry(inp, server, d, aws.instance_type.ultraserver) for d in devices]
        slices.append(SlicePlan(server_name(server), {**where, "devices": entries}))
        out.append(PoolPlan(node, tuple(slices)))
    return out


def _aws_entry(inp: RackInput, server: int, device: AwsDevice, counted: bool) -> JSON:
    """One device in AWS's vocabulary; a chip's health taints (they are kept by
    the rack's chip names) go to its device and to the node device over it."""
    attrs: dict[str, JSON] = {}
    for name, value in device.attributes.items():
        kind = (
            "version"
            if name == "draDriverVersion"
            else "int"
            if isinstance(value, int)
            else "string"
        )
        attrs[name] = {kind: value}
    entry: JSON = {"name": device.name, "attributes": attrs}
    if counted and device.chips:
        used = {aws_chip_name(c): {"value": "1"} for c in device.chips}
        entry["consumesCounters"] = [{"counterSet": COUNTER_SET, "counters": used}]
    taints = [t for c in device.chips for t in inp.taints.get(chip_name(server, c), ())]
    if taints:
        worst = max(taints, key=lambda t: t.get("effect") == "NoExecute")
        entry["taints"] = (
            [dict(worst)] if device.resource_type == NEURON_NODE else [dict(t) for t in taints]
        )
    return entry


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
    conditions, failures = [], []
    if inp.layout.pools == "node" and device.kind == "ultraserver":
        conditions, failures = [RACK_EXCLUSIVE], [RACK_IN_USE]
    if inp.binding_conditions and device.kind in FABRIC_KINDS:
        conditions, failures = [*conditions, FABRIC_READY], [*failures, FABRIC_FAILED]
    if conditions:
        entry["bindingConditions"] = conditions
        entry["bindingFailureConditions"] = failures
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
