"""The cores a published device gives one node, read from the attributes the
controller published with it (poolplan.py): the one way a device a claim
was allocated becomes cores on a node.

Attributes, not the device's name: the node daemon does not know the rack's
layout. The UltraServer's mode, flatDevice, pools and partitionSizes decide
which devices a rack has and what they are called, and a daemon placed by
`--node NAME=INDEX` runs without parsing that spec, or any UltraServer object
at all; the attributes are also what the scheduler allocated from, whatever
the spec has said since. So names stay opaque (naming.py). The controller
knows the layout and looks its own devices up there
(`layout.devices_by_name`, `awsprofile.rack_chip_aliases`);
tests/devicemodel/test_devicecores.py holds both readings of every device of
every layout and profile to the same cores.

Trainium devices carry `resourceType`, `ultraserverId`, `serverIndex`,
`chipIndex`, `coreStart` and `coreCount`. In the AWS profile a device's pool
is its node, and `resourceType` with `deviceId` say which chips it holds
(`neuron_device`: one, `neuron_node`: all of the node's, an EFA interface:
none).
"""

from collections.abc import Mapping

from driver.devicemodel import attributes as attr
from driver.devicemodel.awsprofile import EFA_DEVICE, NEURON_DEVICE, NEURON_NODE
from driver.devicemodel.placement import NodePlace
from simdevice.topology import CoreRange

Attributes = Mapping[str, str | int | bool]
"""One device's attributes, unqualified names, plain values."""

AWS_KINDS = (NEURON_DEVICE, NEURON_NODE, EFA_DEVICE)
"""The AWS profile's `resourceType`s."""


class AllocationError(ValueError):
    """The claim cannot be prepared on this node; the message says why and names the field."""


def _int_attr(attrs: Attributes, name: str, where: str) -> int:
    value = attrs.get(name)
    if not isinstance(value, int) or isinstance(value, bool):
        raise AllocationError(
            f"{where}: device attribute {name!r} is missing or not an int; "
            "is the controller publishing this driver's partitioned slices?"
        )
    return value


def _aws_ranges(
    attrs: Attributes, pool: str, place: NodePlace, where: str
) -> tuple[CoreRange, ...]:
    """The cores an AWS-profile device gives this node: its pool is its node."""
    if pool != place.node_name:
        raise AllocationError(
            f"{where}: device is in pool {pool!r}, but this is node {place.node_name}; "
            "the claim was allocated for another node"
        )
    cores = place.rack.chip.cores
    kind = attrs.get(attr.KIND)
    if kind == EFA_DEVICE:
        return ()
    if kind == NEURON_NODE:
        return tuple(CoreRange(chip, 0, cores) for chip in range(place.rack.chips_per_server))
    chip = _int_attr(attrs, "deviceId", where)
    if not 0 <= chip < place.rack.chips_per_server:
        raise AllocationError(f"{where}: deviceId {chip} is not a chip of this node")
    return (CoreRange(chip, 0, cores),)


def device_ranges(
    attrs: Attributes, place: NodePlace, where: str, pool: str = ""
) -> tuple[CoreRange, ...]:
    """The cores one device gives this node, or AllocationError if it is not here."""
    kind = attrs.get(attr.KIND)
    if kind in AWS_KINDS:
        return _aws_ranges(attrs, pool, place, where)
    rack_id = attrs.get(attr.ULTRASERVER)
    if rack_id != place.ultraserver:
        raise AllocationError(
            f"{where}: device is in UltraServer {rack_id!r}, but node {place.node_name} is in "
            f"{place.ultraserver!r}; the claim was allocated for another node"
        )
    cores = place.rack.chip.cores
    local_chips = range(place.rack.chips_per_server)
    if kind == "ultraserver":
        return tuple(CoreRange(chip, 0, cores) for chip in local_chips)
    server = _int_attr(attrs, attr.SERVER_INDEX, where)
    if server != place.server_index:
        raise AllocationError(
            f"{where}: device is on server {server}, but node {place.node_name} is server "
            f"{place.server_index}; the claim was allocated for another node"
        )
    if kind == "server":
        return tuple(CoreRange(chip, 0, cores) for chip in local_chips)
    chip_index = _int_attr(attrs, attr.CHIP_INDEX, where)
    chip = chip_index % place.rack.chips_per_server
    if chip_index >= place.rack.chips_per_server and chip_index // len(local_chips) != server:
        raise AllocationError(f"{where}: chipIndex {chip_index} is not on server {server}")
    if kind == "chip":
        return (CoreRange(chip, 0, cores),)
    if kind == "core":
        start = _int_attr(attrs, attr.CORE_START, where)
        count = _int_attr(attrs, attr.CORE_COUNT, where)
        if start < 0 or count < 1 or start + count > cores:
            raise AllocationError(f"{where}: cores [{start}, {start + count}) are not on a chip")
        return (CoreRange(chip, start, count),)
    raise AllocationError(
        f"{where}: resourceType {kind!r} is not one of core, chip, server, ultraserver, "
        f"{', '.join(AWS_KINDS)}"
    )
