"""The AWS profile: the same simulated hardware described in the vocabulary AWS
publishes for its Neuron DRA driver, so manifests written for EKS run here
unchanged. Pure: a rack, a server and its node in, devices with AWS's names
and attributes out, and the rack's chips each of them holds
(docs/aws-neuron.md has the table of both vocabularies).

What the profile publishes, per node (one pool per node, named after it):
- `neurondevice0..N-1`, one whole chip each (`resourceType: neuron_device`):
  AWS publishes no core partitions, and LNC is the claim's config;
- on an UltraServer's node, also `neuronnode` (`resourceType: neuron_node`),
  the whole node, which claims for UltraServer modes ask for; a counter per
  chip keeps it apart from the node's chips;
- `efa0..N-1`, one simulated EFA interface per chip, carrying the same
  `resource.aws.com/devicegroup*_id` as its chip, for the EFA DeviceClass.
  On EKS these come from a driver of their own; here this driver publishes
  them too (one plugin prepares both), with `resourceType: efa` and the
  common attributes, so the two DeviceClasses tell them apart and a selector
  on a common attribute never meets a device without it.
Every device of a node that AWS's UltraServer operator allocated to a workload
also carries `workloadId` (driver/controller/workloadtags.py), which the
node daemon checks against the claim's `neuron.aws.com/workload-id` label.

So `allocationMode: All` over the Neuron class on a standalone instance
(AWS's examples) takes every chip of one node; on an UltraServer's node `All`
must select `resourceType == 'neuron_device'` (or `neuron_node`), as the node
device and its chips cannot all be allocated at once.
"""

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from driver.devicemodel import naming
from simdevice.topology import GROUP_SIZES, ChipPlace, RackSpec, chip_places

AWS_DRIVER: Final = "neuron.aws.com"
"""AWS's DRA driver name, its DeviceClass name and the attributes' domain."""
AWS_CONFIG_API: Final = f"{AWS_DRIVER}/v1"
GROUP_DOMAIN: Final = "resource.aws.com"
"""The domain of the connected-group ids, shared with EFA devices."""
EFA_CLASS: Final = "efa.networking.k8s.aws"
NEURON_DEVICE: Final = "neuron_device"
NEURON_NODE: Final = "neuron_node"
EFA_DEVICE: Final = "efa"
NODE_DEVICE_NAME: Final = "neuronnode"
COUNTER_SET: Final = "neurondevices"
DEFAULT_NEURON_DRIVER_VERSION: Final = "2.25.4.0"
"""The Neuron driver version AWS's own example selects on, so it matches here."""
ULTRASERVER_LABEL_PREFIX: Final = "neuron.amazonaws.com/ultraserver-server-id-"
"""Node labels (`...-2`, `...-4`) naming the pair and the quad of an UltraServer's
nodes a node belongs to, for LeaderWorkerSet's exclusive topology."""
ULTRASERVER_MODES: Final = (1, 2, 4)
"""Nodes of an UltraServer a job spans, as AWS's UltraServer tooling accepts them."""
WORKLOAD_ID_ATTRIBUTE: Final = "workloadId"
"""The attribute (in the driver's domain) on every device of a node that AWS's
UltraServer operator allocated to a workload: that allocation's workloadId."""
WORKLOAD_ID_LABEL: Final = f"{AWS_DRIVER}/workload-id"
"""The label the operator's ResourceClaimTemplate gives each ResourceClaim of a
workload: the workloadId of the nodes allocated to it."""
MAX_WORKLOAD_ID: Final = 64
"""The longest string attribute value a ResourceSlice takes (resource.k8s.io/v1)."""


@dataclass(frozen=True)
class InstanceType:
    """An EC2 instance type the profile can simulate: its chips, and whether its
    nodes are part of an UltraServer."""

    name: str
    generation: str
    ultraserver: bool


INSTANCE_TYPES: Final = {
    t.name: t
    for t in (
        InstanceType("trn2.48xlarge", "trn2", ultraserver=False),
        InstanceType("trn2u.48xlarge", "trn2", ultraserver=True),
        InstanceType("trn3.48xlarge", "trn3-gen1", ultraserver=True),
        InstanceType("trn3pd98.48xlarge", "trn3-gen2", ultraserver=True),
    )
}
"""trn2.48xlarge and trn2u.48xlarge are AWS's names (its DRA guide). AWS has not
said which Trn3 instance name belongs to which UltraServer: trn3.48xlarge (16
chips a node, like trn2) is used for Gen1 and trn3pd98.48xlarge for Gen2 here;
an UltraServer's `spec.instanceType` sets another."""
DEFAULT_INSTANCE_TYPES: Final = {
    "trn2": "trn2u.48xlarge",
    "trn3-gen1": "trn3.48xlarge",
    "trn3-gen2": "trn3pd98.48xlarge",
}


@dataclass(frozen=True)
class AwsVersions:
    """The versions the profile's devices say they run."""

    dra_driver: str
    """This driver's own version (the package's)."""
    neuron_driver: str = DEFAULT_NEURON_DRIVER_VERSION


class ProfileError(ValueError):
    """A value the AWS profile cannot describe; the message names the field."""


def instance_type(generation: str, name: str | None) -> InstanceType:
    """The instance type of a rack's nodes: `name` if given, else the
    generation's default; it must be of that generation."""
    chosen = name or DEFAULT_INSTANCE_TYPES.get(generation)
    found = INSTANCE_TYPES.get(chosen or "")
    if found is None:
        raise ProfileError(
            f"spec.instanceType: {chosen!r} is not simulated; use one of "
            f"{', '.join(sorted(INSTANCE_TYPES))}"
        )
    if found.generation != generation:
        raise ProfileError(
            f"spec.instanceType: {found.name} is a {found.generation} instance, but "
            f"spec.generation is {generation}"
        )
    return found


def chip_name(local_index: int) -> str:
    return f"neurondevice{local_index}"


def efa_name(local_index: int) -> str:
    return f"efa{local_index}"


def group_id(node: str, size: int, group: int) -> str:
    """A hash naming one connected group of `size` chips of `node`."""
    return hashlib.sha256(f"{node}/{size}/{group}".encode()).hexdigest()[:16]


def efa_address(local_index: int) -> str:
    """The simulated EFA interface's PCI address (bus:device.function) beside a chip."""
    return f"0000:{0x10 + local_index:02x}:00.0"


def group_attributes(place: ChipPlace, node: str, rack: RackSpec) -> dict[str, str]:
    """`resource.aws.com/devicegroup{1,4,8,16}_id` of a chip (and of its EFA): groups
    that fit in one node; a group of 1 is named by the EFA's PCI address."""
    out = {f"{GROUP_DOMAIN}/devicegroup1_id": efa_address(place.local_index)}
    for size in GROUP_SIZES:
        if 1 < size <= rack.chips_per_server:
            out[f"{GROUP_DOMAIN}/devicegroup{size}_id"] = group_id(
                node, size, place.local_index // size
            )
    return out


@dataclass(frozen=True)
class AwsDevice:
    """One device of a node in the AWS profile."""

    name: str
    resource_type: str
    chips: tuple[int, ...]
    """Local indexes of the node's chips it holds (none for an EFA interface)."""
    attributes: Mapping[str, str | int]
    """Attribute name (unqualified: the driver's domain; qualified: as written)
    to value."""


def node_devices(
    rack: RackSpec,
    server: int,
    node: str,
    itype: InstanceType,
    *,
    ultraserver_name: str,
    versions: AwsVersions,
    workload_id: str | None = None,
) -> list[AwsDevice]:
    """Every device `node` (server `server` of the rack) publishes: chips, the
    node device of an UltraServer's node, EFA interfaces; each carries
    `workloadId` when the UltraServer operator allocated the node to a workload."""
    places = [p for p in chip_places(rack) if p.server == server]
    common: dict[str, str | int] = {
        "instanceType": itype.name,
        "neuronDriverVersion": versions.neuron_driver,
        "draDriverVersion": versions.dra_driver,
    }
    layers = places[0].network_node_layers
    for level, layer in enumerate(layers, start=1):
        common[f"networkNodeLayer{level}"] = f"{ultraserver_name}-{layer}"
    if itype.ultraserver:
        common["capacityBlockId"] = f"cr-{group_id(ultraserver_name, 0, 0)}"
    if workload_id is not None:
        common[WORKLOAD_ID_ATTRIBUTE] = workload_id
    devices = []
    for place in places:
        attrs: dict[str, str | int] = {
            **common,
            "deviceId": place.local_index,
            "resourceType": NEURON_DEVICE,
            **group_attributes(place, node, rack),
        }
        if not itype.ultraserver:
            attrs.update(grid_attributes(place.local_index, rack.chips_per_server))
        chip = place.local_index
        devices.append(AwsDevice(chip_name(chip), NEURON_DEVICE, (chip,), attrs))
    if itype.ultraserver:
        node_attrs: dict[str, str | int] = {**common, "resourceType": NEURON_NODE}
        chips = tuple(p.local_index for p in places)
        devices.append(AwsDevice(NODE_DEVICE_NAME, NEURON_NODE, chips, node_attrs))
    for place in places:
        efa: dict[str, str | int] = {
            **common,
            "deviceId": place.local_index,
            "resourceType": EFA_DEVICE,
            **group_attributes(place, node, rack),
        }
        devices.append(AwsDevice(efa_name(place.local_index), EFA_DEVICE, (), efa))
    return devices


def grid_attributes(local_index: int, chips: int) -> dict[str, str | int]:
    """Row, column and row groups of a chip in a standalone instance's 4-wide grid."""
    if chips <= 1:
        return {}
    row, column = divmod(local_index, 4)
    out: dict[str, str | int] = {"topology_x": row, "topology_y": column, "topology4_id": row}
    if chips >= 8:
        out["topology8_id"] = local_index // 8
    return out


def rack_chip_aliases(
    rack: RackSpec, nodes: Mapping[int, str]
) -> dict[tuple[str, str], tuple[str, ...]]:
    """(node, device name) -> the rack's chips (`naming.chip_name`) the device
    holds, for every node `nodes` (server -> node) names: a chip its one
    chip, the node device all of the node's, an EFA interface none. By these
    the controller counts the cores published and allocated in an
    UltraServer's status."""
    out: dict[tuple[str, str], tuple[str, ...]] = {}
    for server, node in nodes.items():
        chips = tuple(naming.chip_name(server, c) for c in range(rack.chips_per_server))
        for local, planned in enumerate(chips):
            out[(node, chip_name(local))] = (planned,)
            out[(node, efa_name(local))] = ()
        out[(node, NODE_DEVICE_NAME)] = chips
    return out
