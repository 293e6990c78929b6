"""The simulated NeuronLink/EFA fabric of a claim's devices: whether its domain
is up, and the addresses and ring a job reads from the claim's status.

Pure: a device, the rack's fabric spec and two timestamps in, one
`status.devices` entry (resource.k8s.io/v1 AllocatedDeviceStatus) out. The
node daemon puts the same ring and addresses into the container's
environment, computed from the same chips.
Server and ultraserver devices span chips that talk over the fabric, so they
carry the binding conditions below and the scheduler binds a pod only once
FabricReady is True; a single chip or core partition needs no domain.
"""

import datetime
import hashlib
import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from driver.devicemodel.layout import PlannedDevice
from driver.devicemodel.naming import rack_of_pool, server_name
from driver.devicemodel.ultraserver import FabricSpec
from driver.jsontypes import JSON
from simdevice.topology import ChipPlace

FABRIC_READY: Final = "FabricReady"
FABRIC_FAILED: Final = "FabricFailed"
FABRIC_KINDS: Final = frozenset({"server", "ultraserver"})
INTERFACE: Final = "neuronlink0"
MAX_IPS: Final = 16
"""NetworkDeviceData.ips holds at most 16 addresses; a larger device gets its
domain's prefix instead of one address per chip."""


@dataclass(frozen=True)
class DeviceStatus:
    entry: JSON  # the status.devices entry
    recheck_seconds: float | None  # when the entry changes by itself; None: it does not


def rack_network(pool: str) -> ipaddress.IPv6Network:
    """The rack's IPv6 ULA /48: fd + 40 bits of the rack name's hash, whichever
    of the rack's pools (`rack` or `node` layout) holds the device."""
    digest = hashlib.sha256(rack_of_pool(pool).encode()).digest()
    prefix = bytes([0xFD]) + digest[:5] + bytes(10)
    return ipaddress.IPv6Network((prefix, 48))


def chip_address(pool: str, server: int, local_chip: int) -> str:
    """`<rack /48>:<server>::<chip + 1>/64`, written canonically (RFC 5952), as
    the apiserver requires."""
    base = int(rack_network(pool).network_address)
    address = ipaddress.IPv6Address(base | server << 64 | local_chip + 1)
    return ipaddress.IPv6Interface((address, 64)).compressed


def hardware_address(pool: str, rack_chip: int) -> str:
    """A locally administered MAC for one chip's fabric port."""
    digest = hashlib.sha256(rack_of_pool(pool).encode()).digest()
    octets = (0x02, digest[0], digest[1], digest[2], rack_chip >> 8, rack_chip & 0xFF)
    return ":".join(f"{o:02x}" for o in octets)


def fabric_ips(pool: str, chips: Sequence[ChipPlace]) -> list[str]:
    """One address per chip, or the domain's prefix when the chips are more
    than NetworkDeviceData can list."""
    if len(chips) <= MAX_IPS:
        return [chip_address(pool, c.server, c.local_index) for c in chips]
    return [rack_network(pool).compressed]


def network_data(pool: str, chips: Sequence[ChipPlace]) -> JSON:
    """A device's fabric interface, as written to the claim's status."""
    data: JSON = {"interfaceName": INTERFACE, "ips": fabric_ips(pool, chips)}
    if len(chips) == 1:
        data["hardwareAddress"] = hardware_address(pool, chips[0].index)
    return data


def ring(chips: Sequence[ChipPlace]) -> list[int]:
    """Rack chip indexes in ring order: server-major, as the chips are cabled."""
    return sorted(c.index for c in chips)


def failed_servers(device: PlannedDevice, fabric: FabricSpec) -> list[int]:
    return sorted({c.server for c in device.chips} & fabric.failed_servers)


def condition(
    kind: str,
    status: bool,
    *,
    reason: str,
    message: str,
    now: datetime.datetime,
    old: Sequence[JSON],
) -> JSON:
    """A metav1.Condition; its transition time stays while its status does."""
    previous = next((c for c in old if c.get("type") == kind), None)
    value = "True" if status else "False"
    since = (
        previous["lastTransitionTime"]
        if previous and previous.get("status") == value and previous.get("lastTransitionTime")
        else now.strftime("%Y-%m-%dT%H:%M:%SZ")
    )
    return {
        "type": kind,
        "status": value,
        "reason": reason,
        "message": message,
        "lastTransitionTime": since,
    }


def fabric_conditions(
    device: PlannedDevice,
    fabric: FabricSpec,
    allocated_at: datetime.datetime,
    now: datetime.datetime,
    old: Sequence[JSON],
) -> tuple[list[JSON], float | None]:
    """FabricReady / FabricFailed of a device with a fabric domain, and when to look again."""
    servers = ", ".join(server_name(s) for s in failed_servers(device, fabric))
    left = (allocated_at - now).total_seconds() + fabric.setup_seconds
    recheck: float | None = None
    if servers:
        ready, failed, reason = False, True, "LinkTrainingFailed"
        message = f"NeuronLink training failed on {servers} (simulated: spec.fabric.failedServers)"
    elif left > 0:
        ready, failed, reason, recheck = False, False, "Configuring", left
        message = f"bringing up the fabric domain of {len(device.chips)} chips"
    else:
        ready, failed, reason = True, False, "Configured"
        message = f"fabric domain of {len(device.chips)} chips up"
    return [
        condition(FABRIC_READY, ready, reason=reason, message=message, now=now, old=old),
        condition(FABRIC_FAILED, failed, reason=reason, message=message, now=now, old=old),
    ], recheck


def device_status(
    driver: str,
    pool: str,
    device: PlannedDevice,
    *,
    fabric: FabricSpec,
    allocated_at: datetime.datetime,
    now: datetime.datetime,
    old: JSON | None = None,
) -> DeviceStatus:
    """The `status.devices` entry of one allocated device; `old` is the entry
    there now, if any, whose condition transition times are kept. Addresses
    come from the rack, whichever of its pools holds the device."""
    previous: list[JSON] = list((old or {}).get("conditions") or [])
    conditions: list[JSON] = []
    recheck = None
    if fabric.binding_conditions and device.kind in FABRIC_KINDS:
        conditions, recheck = fabric_conditions(device, fabric, allocated_at, now, previous)
    entry: JSON = {
        "driver": driver,
        "pool": pool,
        "device": device.name,
        "conditions": conditions,
        "networkData": network_data(pool, device.chips),
        "data": {
            "ultraserver": rack_of_pool(pool),
            "kind": device.kind,
            "ring": ring(device.chips),
        },
    }
    return DeviceStatus(entry, recheck)
