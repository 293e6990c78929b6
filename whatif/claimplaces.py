"""The chips a live job's claims were allocated, as the ranks
`whatif.placetimes` times its work on. An allocation result names a
pool and a device: the pool's rack is an UltraServer whose spec says what
its device names cover (`devicemodel.layout.devices_by_name`, which the
controller reads allocations with too), and the node the pod was bound to
numbers the rack as the fleet does. Pure: the replay hands in what its
watch saw."""

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from driver.devicemodel.layout import devices_by_name
from driver.devicemodel.naming import rack_of_pool
from driver.devicemodel.ultraserver import UltraServerSpec
from simdevice.fabric import RankPlace


def allocation_results(claim: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """`status.allocation.devices.results` of a claim; empty until allocated."""
    status = claim.get("status") or {}
    return list(((status.get("allocation") or {}).get("devices") or {}).get("results") or ())


@dataclass(frozen=True)
class HeldDevices:
    """One pod's claims' allocation results, and the node it was bound to."""

    node: str
    results: Sequence[Mapping[str, Any]]


@dataclass(frozen=True)
class FleetDevices:
    """What the fleet's device names mean: each rack's UltraServer spec by
    name, and node -> (rack, server) in the fleet's numbering."""

    driver: str
    racks: Mapping[str, UltraServerSpec]
    servers: Mapping[str, tuple[int, int]]

    def places(self, held: Iterable[HeldDevices]) -> tuple[RankPlace, ...] | None:
        """The chips the pods hold, one rank each, in (rack, server, chip)
        order; None where a device or node is not the fleet's to number (a
        device published under another vocabulary, a node outside `servers`)."""
        chips: set[tuple[int, int, int]] = set()
        for pod in held:
            where = self.servers.get(pod.node)
            if where is None:
                return None
            for result in pod.results:
                if result["driver"] != self.driver:
                    continue
                spec = self.racks.get(rack_of_pool(result["pool"]))
                if spec is None:
                    return None
                named = devices_by_name(
                    spec.rack.generation, spec.mode, spec.flat_device, spec.layout
                )
                device = named.get(result["device"])
                if device is None:
                    return None
                chips.update((where[0], p.server, p.local_index) for p in device.chips)
        return tuple(RankPlace(r, s, c) for r, s, c in sorted(chips))
