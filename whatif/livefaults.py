"""Failures of the live replay, on its simulated clock: which failures and
repairs are due by a time, and the simulator-control request each one is.
Pure: the replay's loop asks and sends."""

import heapq
from collections.abc import Iterable
from dataclasses import dataclass, field

from driver.jsontypes import JSON
from simdevice.topology import RackSpec
from whatif.claimplaces import allocation_results
from whatif.faults import Failure, Failures
from whatif.jobobjects import claim_pod


@dataclass(frozen=True)
class FaultAction:
    time: float
    """Simulated seconds."""
    inject: bool
    """False: the repair that clears it."""
    failure: Failure


@dataclass
class FaultClock:
    """Every failure `failures` draws, each cleared `repair_seconds` after it."""

    failures: Failures
    injected: list[Failure] = field(default_factory=list)
    _next: Failure | None = None
    _repairs: list[tuple[float, int, Failure]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._next = self.failures.after(0.0)

    def next_time(self) -> float | None:
        """When the next action is due (simulated seconds), None if never."""
        times = [when for when, _, _ in self._repairs[:1]]
        if self._next is not None:
            times.append(self._next.time)
        return min(times, default=None)

    def next_repair(self) -> float | None:
        """When the next repair is due, None if nothing is out of service."""
        return self._repairs[0][0] if self._repairs else None

    def due(self, now: float) -> list[FaultAction]:
        """The injections and repairs due by `now`, in time order."""
        actions = []
        while True:
            repair = self._repairs[0] if self._repairs else None
            failure = self._next if self._next and self._next.time <= now else None
            if repair and repair[0] <= now and (failure is None or repair[0] <= failure.time):
                heapq.heappop(self._repairs)
                actions.append(FaultAction(repair[0], False, repair[2]))
            elif failure:
                self.injected.append(failure)
                repaired = failure.time + self.failures.repair_seconds
                heapq.heappush(self._repairs, (repaired, len(self.injected), failure))
                actions.append(FaultAction(failure.time, True, failure))
                self._next = self.failures.after(failure.time)
            else:
                return actions

    def outstanding(self) -> list[Failure]:
        """Failures injected and not yet repaired, to clear when the replay stops."""
        return [failure for _, _, failure in self._repairs]


def fault_request(failure: Failure, rack: RackSpec, node: str) -> JSON:
    """The simulator-control body for `failure` on `node`: a whole chip fails as
    an uncorrectable HBM error, one core as an uncorrectable SRAM error in it
    (both take the device out of service until cleared)."""
    chip = failure.chip[2]
    if failure.mask == (1 << rack.chip.cores) - 1:
        return {"node": node, "chip": chip, "kind": "ecc-uncorrected-hbm"}
    core = failure.mask.bit_length() - 1
    return {"node": node, "chip": chip, "core": core, "kind": "ecc-uncorrected-sram"}


def failed_devices(slices: Iterable[JSON], driver: str) -> frozenset[tuple[str, str]]:
    """(pool, device) of every device of `driver` tainted NoExecute: those
    whose pods Kubernetes evicts."""
    found = set()
    for s in slices:
        spec = s["spec"]
        if spec.get("driver") != driver:
            continue
        for device in spec.get("devices") or ():
            if any(t.get("effect") == "NoExecute" for t in device.get("taints") or ()):
                found.add((spec["pool"]["name"], device["name"]))
    return frozenset(found)


def claims_on(claims: Iterable[JSON], devices: frozenset[tuple[str, str]]) -> list[str]:
    """The pods of claims reserved for a pod while allocated one of `devices`:
    those Kubernetes is to evict."""
    found = []
    for claim in claims:
        if not (claim.get("status") or {}).get("reservedFor"):
            continue
        if any((r["pool"], r["device"]) in devices for r in allocation_results(claim)):
            found.append(claim_pod(claim))
    return found
