"""Which cores of a fleet are held, and where a pod of a given shape fits.

Every chip is a bit mask of its cores. A partition of k cores must sit at an
offset that is a multiple of k, a pod of n chips takes n free chips of one
server, a server pod a server with every chip free, a rack pod a rack with
every chip free: the exclusions the device model publishes."""

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Final

from simdevice.topology import RackSpec
from whatif.jobs import PodShape

POLICIES: Final = ("first-fit", "best-fit")
"""The anchors' placement rules, replayed beside every live replay."""
SPREAD: Final = "spread"
PLACEMENTS: Final = (*POLICIES, SPREAD)
"""Every rule `Fleet.place` knows; `spread` is asked for by name."""


@dataclass(frozen=True)
class Placement:
    """Cores a pod holds: per (rack, server, chip), the mask of its cores."""

    masks: tuple[tuple[tuple[int, int, int], int], ...]


def servers_of(placements: Sequence[Placement]) -> list[tuple[int, int]]:
    """(rack, server) of every server the placements hold cores on."""
    return sorted({(r, s) for p in placements for (r, s, _), _ in p.masks})


class Fleet:
    def __init__(self, rack: RackSpec, racks: int) -> None:
        self.rack = rack
        self.racks = racks
        self.full = (1 << rack.chip.cores) - 1
        self.used = [
            [[0] * rack.chips_per_server for _ in range(rack.servers)] for _ in range(racks)
        ]
        self.server_free = [[self.server_cores] * rack.servers for _ in range(racks)]
        self.rack_free = [self.server_cores * rack.servers] * racks

    @property
    def server_cores(self) -> int:
        return self.rack.chips_per_server * self.rack.chip.cores

    @property
    def cores(self) -> int:
        return self.racks * self.rack.servers * self.server_cores

    def free_cores(self) -> int:
        return sum(self.rack_free)

    def hold(self, placement: Placement) -> None:
        for (r, s, c), mask in placement.masks:
            assert not self.used[r][s][c] & mask, "placed on a held core"
            self.used[r][s][c] |= mask
            self._count(r, s, -mask.bit_count())

    def release(self, placement: Placement) -> None:
        for (r, s, c), mask in placement.masks:
            self.used[r][s][c] &= ~mask
            self._count(r, s, mask.bit_count())

    def _count(self, r: int, s: int, delta: int) -> None:
        self.server_free[r][s] += delta
        self.rack_free[r] += delta

    def place(self, shape: PodShape, policy: str) -> Placement | None:
        """Where a pod of `shape` goes under `policy`, or None if it fits nowhere.

        First fit takes the lowest rack, server, chip and offset; best fit the
        candidate whose chip, then server, then rack has the fewest free
        cores, so pieces fill what is already in use and whole chips, servers
        and racks stay whole for the pods that need them. Spread takes the
        candidate on the server, then the rack, with the most free cores
        (first fit among equals), as the kube-scheduler's default scoring
        (least allocated) spreads pods over nodes: a job's pods land on as
        many servers and racks as are free."""
        candidates = self._candidates(shape)
        if policy == "first-fit":
            return next(candidates, (None, None))[1]
        if policy == SPREAD:
            return min((c[1] for c in candidates), key=self._crowding, default=None)
        best = min(candidates, key=lambda c: c[0], default=(None, None))
        return best[1]

    def _crowding(self, placement: Placement) -> tuple[int, int]:
        """How held the server and rack of a placement's first chip are."""
        (r, s, _), _ = placement.masks[0]
        return -self.server_free[r][s], -self.rack_free[r]

    def _candidates(self, shape: PodShape) -> Iterator[tuple[tuple[int, ...], Placement]]:
        """(best-fit key, placement) of every place the pod fits, in first-fit order."""
        spec = self.rack
        for r in range(self.racks):
            if shape.kind == "rack":
                if self.rack_free[r] == self.server_cores * spec.servers:
                    masks = tuple(
                        ((r, s, c), self.full)
                        for s in range(spec.servers)
                        for c in range(spec.chips_per_server)
                    )
                    yield (r,), Placement(masks)
                continue
            for s in range(spec.servers):
                chips = self.used[r][s]
                if shape.kind == "server":
                    if self.server_free[r][s] == self.server_cores:
                        masks = tuple(((r, s, c), self.full) for c in range(len(chips)))
                        yield (self.rack_free[r], r, s), Placement(masks)
                    continue
                if shape.kind == "chips":
                    free = [c for c, used in enumerate(chips) if not used]
                    if len(free) >= shape.count:
                        masks = tuple(((r, s, c), self.full) for c in free[: shape.count])
                        yield (self.server_free[r][s], self.rack_free[r], r, s), Placement(masks)
                    continue
                for c, used in enumerate(chips):
                    for offset in range(0, spec.chip.cores, shape.count):
                        mask = ((1 << shape.count) - 1) << offset
                        if not used & mask:
                            chip_free = spec.chip.cores - used.bit_count()
                            key = (chip_free, self.server_free[r][s], self.rack_free[r], r, s, c)
                            yield key, Placement((((r, s, c), mask),))
                            break

    def unusable_free_cores(self, shapes: set[PodShape]) -> int:
        """Free cores that none of `shapes` could use where they lie: the
        fragmentation the waiting pods see."""
        if not shapes:
            return 0
        spec = self.rack
        sizes = sorted(s.count for s in shapes if s.kind == "cores")
        fewest_chips = min((s.count for s in shapes if s.kind == "chips"), default=None)
        wants_server = any(s.kind == "server" for s in shapes)
        wants_rack = any(s.kind == "rack" for s in shapes)
        usable = 0
        for r in range(self.racks):
            rack_whole = self.rack_free[r] == self.server_cores * spec.servers
            for s in range(spec.servers):
                chips = self.used[r][s]
                free_chips = chips.count(0)
                whole_chips_usable = (
                    (wants_rack and rack_whole)
                    or (wants_server and free_chips == len(chips))
                    or (fewest_chips is not None and free_chips >= fewest_chips)
                )
                for used in chips:
                    if not used and whole_chips_usable:
                        usable += spec.chip.cores
                    else:
                        usable += _cores_in_free_blocks(used, spec.chip.cores, sizes)
        return self.free_cores() - usable


def _cores_in_free_blocks(used: int, cores: int, sizes: list[int]) -> int:
    """Free cores of a chip inside an aligned free block of one of `sizes`."""
    covered = 0
    for size in sizes:
        for offset in range(0, cores, size):
            mask = ((1 << size) - 1) << offset
            if not used & mask:
                covered |= mask
    return covered.bit_count()
