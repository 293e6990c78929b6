"""One rack as a profile publishes it: which of its devices health and status
are judged on, the input of its pool plan (poolplan.py), the aliases by which
per-node devices count as the rack's chips, and the devices `order`
publishing lists last. Decided here, by the profile, so the controller only
passes in what it watched and writes out what comes back.
"""

from collections.abc import Collection, Mapping, Sequence

from driver.devicemodel import awsprofile
from driver.devicemodel.awsprofile import AwsVersions, instance_type
from driver.devicemodel.blocking import blocked_devices
from driver.devicemodel.layout import PlannedDevice, build_layout, planned_devices
from driver.devicemodel.nodemap import NodeMapping
from driver.devicemodel.poolplan import AwsRack, RackInput, Taint
from driver.devicemodel.profiles import Profile
from driver.devicemodel.ultraserver import UltraServerSpec
from driver.names import driver_version
from simdevice.topology import RackSpec


def rack_devices(spec: UltraServerSpec, profile: Profile) -> tuple[PlannedDevice, ...]:
    """Every device the profile defines of the rack, whether or not its node
    exists: the devices health taints and status counts are worked out on.
    Per-node devices are whole chips, so the rack's chips stand for them
    (`device_aliases`); otherwise the rack's devices in its mode and layout."""
    if profile.per_node_devices:
        return planned_devices(spec.rack, "flat", "chip")
    return planned_devices(spec.rack, spec.mode, spec.flat_device, spec.layout)


def rack_input(
    spec: UltraServerSpec,
    profile: Profile,
    mapping: NodeMapping,
    taints: Mapping[str, Sequence[Taint]],
    *,
    binding_served: bool = True,
    rack_advertised: bool = True,
    versions: AwsVersions | None = None,
    workloads: Mapping[str, str] | None = None,
    publishing: str = "plain",
    allocated: Collection[str] = (),
) -> RackInput:
    """The input of the rack's pool plan. `taints`: device name -> its taints
    (of `rack_devices`). `binding_served`: the apiserver keeps binding
    conditions, whatever the spec says. `versions` (the package's when None)
    and `workloads` (node -> workloadId) matter to per-node devices only."""
    return RackInput(
        name=spec.name,
        rack=spec.rack,
        mode=spec.mode,
        flat_device=spec.flat_device,
        nodes=mapping.nodes,
        rack_nodes=mapping.rack_nodes,
        taints=taints,
        binding_conditions=spec.fabric.binding_conditions and binding_served,
        layout=spec.layout,
        binding_served=binding_served,
        rack_advertised=rack_advertised,
        aws=AwsRack(
            instance_type(spec.rack.generation, spec.instance_type),
            versions or AwsVersions(dra_driver=driver_version()),
        )
        if profile.per_node_devices
        else None,
        workloads=dict(workloads or {}) if profile.per_node_devices else {},
        publishing=publishing,
        allocated=frozenset(allocated),
    )


def device_aliases(
    rack: RackSpec, profile: Profile, nodes: Mapping[int, str]
) -> dict[tuple[str, str], tuple[str, ...]]:
    """(pool, published name) -> the names of `rack_devices` that device holds,
    where they differ: per-node devices only (awsprofile.rack_chip_aliases)."""
    return awsprofile.rack_chip_aliases(rack, nodes) if profile.per_node_devices else {}


def order_blocked(
    spec: UltraServerSpec, profile: Profile, publishing: str, allocated: Collection[str]
) -> frozenset[str]:
    """The devices `order` publishing lists after the free ones (blocking.py):
    none unless the rack is partitioned and its profile publishes its layout."""
    if publishing != "order" or spec.mode != "partitioned" or profile.per_node_devices:
        return frozenset()
    return blocked_devices(build_layout(spec.rack, spec.layout), allocated)
