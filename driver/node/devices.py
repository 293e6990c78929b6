"""Which cores of this node a claim's allocation names: pure functions of the
claim, the published ResourceSlices and the node's place in its rack.

Each allocated device is looked up by pool and name in the published slices
and its cores read from its attributes (`devicemodel.devicecores`, which says
why attributes and not names); here the claim's devices are checked against
each other and their configs, and its LNC chosen.
"""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from driver.devicemodel import attributes as attr
from driver.devicemodel import fabric
from driver.devicemodel.awsprofile import NEURON_NODE
from driver.devicemodel.devicecores import AllocationError, Attributes, device_ranges
from driver.devicemodel.placement import NodePlace
from driver.devicemodel.profiles import NEURON_CONFIG, TRAINIUM, ULTRASERVER_CONFIG, ConfigDialect
from driver.node.claimconfig import ConfigError, DeviceConfig, configs_by_request
from simdevice.topology import CoreRange, TopologyError, chip_places


@dataclass(frozen=True)
class AllocatedDevice:
    """One device of the claim and the cores it gives this node."""

    request: str
    pool: str
    device: str
    kind: str
    ranges: tuple[CoreRange, ...]
    share_id: str | None = None
    admin_access: bool = False
    """Allocated with adminAccess (monitoring): shares its cores, never holds them."""


@dataclass(frozen=True)
class ClaimGrant:
    """What a claim's devices give its containers on this node: the devices and
    their cores, the LNC and the cores the containers see, the UltraServer
    mode. Everything prepare writes for the claim, worked out before anything
    is written."""

    devices: tuple[AllocatedDevice, ...]
    lnc: int
    visible_cores: tuple[int, ...]
    ultraserver: bool
    ultraserver_mode: int | None = None
    """Nodes of the UltraServer the job spans (AWS's UltraServerConfig), if set."""


def attribute_value(value: Mapping[str, Any]) -> str | int | bool:
    """The plain value of a `DeviceAttribute` ({"int": 3}, {"string": "x"}, ...)."""
    for key in ("int", "string", "bool", "version"):
        if key in value:
            found: str | int | bool = value[key]
            return found
    raise AllocationError(f"attributes: value {dict(value)!r} has no int/string/bool/version")


def device_attributes(
    slices: Iterable[Mapping[str, Any]], driver: str
) -> dict[tuple[str, str], Attributes]:
    """(pool, device) -> attributes with the driver's qualifier stripped."""
    prefix = f"{driver}/"
    index: dict[tuple[str, str], Attributes] = {}
    for item in slices:
        spec = item.get("spec") or {}
        if spec.get("driver") != driver:
            continue
        pool = (spec.get("pool") or {}).get("name", "")
        for device in spec.get("devices") or []:
            attrs = {
                name.removeprefix(prefix): attribute_value(value)
                for name, value in (device.get("attributes") or {}).items()
                if "/" not in name or name.startswith(prefix)
            }
            index[(pool, device["name"])] = attrs
    return index


ULTRASERVER_KINDS = ("ultraserver", NEURON_NODE)
"""Kinds an UltraServerConfig applies to: the rack, or (AWS) one node of it."""


def requested_lnc(
    devices: Iterable[AllocatedDevice], configs: Mapping[str, list[DeviceConfig]]
) -> int | None:
    """The claim's LNC from its configs (the last one that sets it), or None."""
    requested = {
        config.logical_neuron_core
        for device in devices
        for config in configs.get(device.request, [])[-1:]
        if config.logical_neuron_core is not None
    }
    if len(requested) > 1:
        raise ConfigError(
            "status.allocation.devices.config: requests of one claim ask for different "
            f"logicalNeuronCore values {sorted(requested)}; use one value per claim"
        )
    return requested.pop() if requested else None


def claim_grant(
    claim: Mapping[str, Any],
    attributes: Mapping[tuple[str, str], Attributes],
    place: NodePlace,
    driver: str,
    default_lnc: int,
    *,
    dialect: ConfigDialect = TRAINIUM.dialect,
) -> ClaimGrant:
    """Check the claim's allocation against this node and work out its cores.

    `default_lnc` is the rack's LNC for claims whose config sets none (the
    UltraServer's spec.defaultLogicalNeuronCore). Raises AllocationError or
    ConfigError (both ValueError) before anything is written; the error names
    the field.
    """
    allocation = (claim.get("status") or {}).get("allocation")
    if not allocation:
        raise AllocationError("status.allocation: claim is not allocated; wait for the scheduler")
    devices_status = allocation.get("devices") or {}
    results = devices_status.get("results") or []
    devices: list[AllocatedDevice] = []
    for index, result in enumerate(results):
        if result.get("driver") != driver:
            continue
        where = f"status.allocation.devices.results[{index}]"
        key = (result.get("pool", ""), result.get("device", ""))
        if key not in attributes:
            raise AllocationError(
                f"{where}: device {key[1]!r} of pool {key[0]!r} is not in any ResourceSlice "
                f"of driver {driver}; the slices may have been replaced, reallocate the claim"
            )
        attrs = attributes[key]
        devices.append(
            AllocatedDevice(
                request=result.get("request", ""),
                pool=key[0],
                device=key[1],
                kind=str(attrs.get(attr.KIND)),
                ranges=device_ranges(attrs, place, where, key[0]),
                share_id=result.get("shareID"),
                admin_access=bool(result.get("adminAccess", False)),
            )
        )
    if not devices:
        raise AllocationError(
            f"status.allocation.devices.results: no device of driver {driver}; "
            "the kubelet should not have called this driver"
        )
    configs = configs_by_request(devices_status, driver, [d.request for d in devices], dialect)
    for device in devices:
        for config in configs[device.request]:
            if config.kind == ULTRASERVER_CONFIG and device.kind not in ULTRASERVER_KINDS:
                raise ConfigError(
                    f"status.allocation.devices.config: {ULTRASERVER_CONFIG} applies to request "
                    f"{device.request!r} whose device {device.device!r} is a {device.kind}; "
                    f"use {NEURON_CONFIG} for it"
                )
    requested = requested_lnc(devices, configs)
    lnc = default_lnc if requested is None else requested
    field = (
        f"UltraServer {place.ultraserver} spec.defaultLogicalNeuronCore"
        if requested is None
        else "status.allocation.devices.config"
    )
    fix = "set logicalNeuronCore in a NeuronConfig" if requested is None else "use a smaller value"
    visible: list[int] = []
    for device in devices:
        for core_range in device.ranges:
            try:
                visible.extend(core_range.visible_cores(lnc, place.rack.chip.cores))
            except TopologyError as err:
                raise ConfigError(
                    f"{field}: logicalNeuronCore={lnc} does not fit "
                    f"device {device.device!r} (cores {core_range.start}.."
                    f"{core_range.start + core_range.count - 1}): {err}; {fix}"
                ) from err
    if len(set(visible)) != len(visible):
        raise AllocationError("status.allocation.devices.results: devices overlap in cores")
    ultraserver_modes = {
        config.ultraserver_mode
        for device in devices
        for config in configs.get(device.request, [])
        if config.ultraserver_mode is not None
    }
    if len(ultraserver_modes) > 1:
        raise ConfigError(
            "status.allocation.devices.config: requests of one claim ask for different "
            f"ultraserverMode values {sorted(ultraserver_modes)}; use one value per claim"
        )
    ultraserver_mode = ultraserver_modes.pop() if ultraserver_modes else None
    if ultraserver_mode is not None and ultraserver_mode > place.rack.servers:
        raise ConfigError(
            f"status.allocation.devices.config: ultraserverMode {ultraserver_mode} spans more "
            f"nodes than the {place.rack.servers} of UltraServer {place.ultraserver}; use at "
            f"most {place.rack.servers}"
        )
    return ClaimGrant(
        devices=tuple(devices),
        lnc=lnc,
        visible_cores=tuple(sorted(visible)),
        ultraserver=any(d.kind == "ultraserver" for d in devices),
        ultraserver_mode=ultraserver_mode,
    )


def physical_cores(ranges: Iterable[CoreRange]) -> set[tuple[int, int]]:
    """(local chip, physical core) pairs of some ranges."""
    return {(r.chip, core) for r in ranges for core in r.physical()}


def logical_to_physical(logical: int, lnc: int, cores_per_chip: int) -> list[tuple[int, int]]:
    """The (local chip, physical core) pairs fused into host-global logical core `logical`."""
    per_chip = cores_per_chip // lnc
    chip, index = divmod(logical, per_chip)
    return [(chip, index * lnc + offset) for offset in range(lnc)]


def fabric_of(grant: ClaimGrant, place: NodePlace) -> tuple[list[int], list[str]]:
    """The ring (rack chip indexes) and fabric addresses of the claim's devices,
    the same the controller writes into the claim's status: the rack device
    spans every chip of the rack, any other device the chips it holds here."""
    places = chip_places(place.rack)
    ring: list[int] = []
    ips: list[str] = []
    for device in grant.devices:
        if device.kind == "ultraserver":
            chips = places
        else:
            first = place.server_index * place.rack.chips_per_server
            local = sorted({r.chip for r in device.ranges})
            chips = [places[first + c] for c in local]
        ring.extend(i for i in fabric.ring(chips) if i not in ring)
        ips.extend(ip for ip in fabric.fabric_ips(device.pool, chips) if ip not in ips)
    return ring, ips
