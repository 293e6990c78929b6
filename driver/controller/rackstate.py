"""What one reconcile computes, kept apart from what it reads and writes.

Pure: a parsed UltraServer and the watched state in, the desired slices and
the `Observed` facts for its status out. The reconciler does the I/O around
these functions.
"""

import hashlib
import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import astuple, dataclass, field

from driver.controller.healthtaints import DeviceHealth, Report, device_health, taints
from driver.controller.healthtaints import unhealthy_cores as count_unhealthy_cores
from driver.controller.slices import build_slices
from driver.controller.ultraserverstatus import Observed
from driver.devicemodel.awsprofile import AwsVersions
from driver.devicemodel.layout import PlannedDevice
from driver.devicemodel.naming import rack_of_pool
from driver.devicemodel.nodemap import NodeMapping, map_nodes
from driver.devicemodel.profilerack import device_aliases, rack_devices, rack_input
from driver.devicemodel.profiles import TRAINIUM, Profile
from driver.devicemodel.rackguard import Allocation, Occupancy, occupancy_taints
from driver.devicemodel.ultraserver import UltraServerSpec
from driver.jsontypes import JSON
from driver.names import API_GROUP, API_VERSION

NO_OCCUPANCY = Occupancy(rack_claimed=False, servers_in_use=False)


@dataclass(frozen=True)
class DesiredRack:
    """The rack as it should be published now."""

    mapping: NodeMapping
    devices: tuple[PlannedDevice, ...]  # every device the mode defines
    health: Sequence[DeviceHealth]
    slices: list[JSON]
    aliases: Mapping[tuple[str, str], tuple[str, ...]] = field(default_factory=dict)
    """(pool, published name) -> the devices' names above, where they differ (AWS)."""


def inputs_key(
    rack: Mapping[str, object],
    mapping: NodeMapping,
    reports: Mapping[str, Sequence[Report]],
    driver: str,
    binding_conditions: bool,
    *,
    occupied: Occupancy = NO_OCCUPANCY,
    advertised: bool = True,
    profile: Profile = TRAINIUM,
    versions: AwsVersions | None = None,
    workloads: Mapping[str, str] | None = None,
    blocked: Collection[str] = (),
) -> str:
    """A digest of everything the rack's slices are built from: the UltraServer
    (uid, generation, spec), its node mapping, the health of its nodes, the
    workloadIds of its nodes (AWS profile) and, in the `node` pool layout,
    what the claims hold of it (the guard's taints) and whether its rack
    device is advertised, and, with `order` publishing, the devices blocked.
    Equal digests give equal slices, so a resync compares digests instead of
    rebuilding 2 MB of slices."""
    meta = rack.get("metadata") or {}
    assert isinstance(meta, Mapping)
    health = {
        node: [astuple(r) for r in reports.get(node, ())] for node in sorted(mapping.nodes.values())
    }
    payload = [
        meta.get("uid"),
        meta.get("generation"),
        rack.get("spec"),
        sorted(mapping.nodes.items()),
        sorted(mapping.missing.items()),
        mapping.rack_nodes,
        mapping.rack_problem,
        health,
        driver,
        binding_conditions,
        astuple(occupied),
        advertised,
        profile.name,
        astuple(versions) if versions is not None else None,
        sorted((workloads or {}).items()),
        sorted(blocked),
    ]
    encoded = json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(encoded).hexdigest()


def desired_rack(
    spec: UltraServerSpec,
    nodes: Mapping[str, Mapping[str, str]],
    reports: Mapping[str, Sequence[Report]],
    driver: str,
    *,
    binding_conditions: bool = True,
    mapping: NodeMapping | None = None,
    occupied: Occupancy = NO_OCCUPANCY,
    advertised: bool = True,
    profile: Profile = TRAINIUM,
    versions: AwsVersions | None = None,
    workloads: Mapping[str, str] | None = None,
    publishing: str = "plain",
    allocated: Collection[str] = (),
    aliases: Mapping[tuple[str, str], tuple[str, ...]] | None = None,
) -> DesiredRack:
    """`binding_conditions` False: the apiserver does not keep them, whatever the spec says.
    `mapping` and `aliases`: the node mapping and the profile's device aliases
    (`device_aliases`) when the caller already resolved them. `occupied`:
    what the claims hold of the rack, for the guard's taints, and `advertised`:
    whether its rack device is published (`node` pools only). `profile`: the
    vocabulary to publish in, which decides the rack's devices and plan input
    (driver/devicemodel/profilerack.py); `versions` (the package's when None)
    and `workloads` (node -> workloadId its devices carry) matter to a profile
    of per-node devices only. `publishing`, `allocated`: the order of each
    slice's devices (blocking.py)."""
    mapping = map_nodes(spec, nodes) if mapping is None else mapping
    devices = rack_devices(spec, profile)
    health = device_health(devices, mapping.nodes, reports)
    device_taints = taints(health, driver)
    if spec.layout.pools == "node":
        for name, guard in occupancy_taints(devices, occupied, driver).items():
            device_taints[name] = [*device_taints.get(name, []), *guard]
    inp = rack_input(
        spec,
        profile,
        mapping,
        device_taints,
        binding_served=binding_conditions,
        rack_advertised=advertised,
        versions=versions,
        workloads=workloads,
        publishing=publishing,
        allocated=allocated,
    )
    slices = build_slices(inp, driver)
    if aliases is None:
        aliases = device_aliases(spec.rack, profile, mapping.nodes)
    return DesiredRack(mapping, devices, health, slices, aliases)


def owner_reference(spec: UltraServerSpec) -> JSON:
    """The UltraServer as controller owner of its slices, so they go with it."""
    return {
        "apiVersion": f"{API_GROUP}/{API_VERSION}",
        "kind": "UltraServer",
        "name": spec.name,
        "uid": spec.uid,
        "controller": True,
    }


def allocated_devices(
    claims: Mapping[str, frozenset[Allocation]],
    driver: str,
    pool: str,
    aliases: Mapping[tuple[str, str], tuple[str, ...]] | None = None,
) -> set[str]:
    """Device names of rack `pool` (its server pools too) that some claim holds;
    a device published under an alias (AWS) counts as the devices it stands for."""
    found: set[str] = set()
    for allocations in claims.values():
        for drv, pool_name, device in allocations:
            if drv != driver:
                continue
            if aliases and (pool_name, device) in aliases:
                found.update(aliases[(pool_name, device)])
            elif rack_of_pool(pool_name) == pool:
                found.add(device)
    return found


@dataclass(frozen=True)
class Published:
    """What the apply step left in the cluster and why it stopped, if it did."""

    slices: Sequence[JSON]
    pool_generation: int
    error: str | None = None
    error_reason: str = "PublishFailed"


def observe_rack(
    spec: UltraServerSpec,
    want: DesiredRack,
    published: Published,
    reports: Mapping[str, Sequence[Report]],
    allocated: Collection[str],
) -> Observed:
    names = {
        name
        for s in published.slices
        for d in s["spec"].get("devices") or []
        for name in want.aliases.get((s["spec"]["pool"]["name"], d["name"]), (d["name"],))
    }
    return Observed(
        generation=spec.object_generation,
        servers=spec.rack.servers,
        mapping=want.mapping,
        published=[d for d in want.devices if d.name in names],
        pool_generation=published.pool_generation,
        slices=len(published.slices),
        health=want.health,
        allocated=allocated,
        unhealthy_cores=count_unhealthy_cores(want.mapping.nodes, reports, spec.rack.chip.cores),
        error=published.error,
        error_reason=published.error_reason,
    )


def invalid_spec(generation: int, slices: int, error: str) -> Observed:
    """Status facts of an UltraServer whose spec cannot be published."""
    return Observed(
        generation=generation,
        servers=0,
        mapping=None,
        published=(),
        pool_generation=0,
        slices=slices,
        health=(),
        allocated=(),
        unhealthy_cores=0,
        error=error,
        error_reason="InvalidSpec",
    )
