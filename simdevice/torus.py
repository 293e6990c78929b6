"""How many of a chip's links a ring keeps busy on a torus (a Trn2 instance's
4x4 NeuronLink torus, or the ring of 4 instances its UltraServer joins chips
of the same coordinates in): the fabric level's per-chip figure is split
evenly over the chip's links, and a ring gets the links it can ride.

- Every position of the torus: its k dimensions decompose into k rings
  through every chip with no link in common (a 4x4 torus has 2, as the
  Neuron docs' Intra-node Collective Communications page, KangaRing, says),
  each run both ways: all 2k links.
- Some of the positions, joined by a cycle of direct links: that cycle,
  both ways: 2 links.
- Two neighbours, or positions no cycle of direct links joins (the ring's
  steps are then routed through other chips): 1 link.

Positions are numbered row-major, the last dimension fastest (the rack's
chip order on a Trn2 instance: docs/simulator.md, Topology).
"""

import math
from collections.abc import Iterable, Sequence
from functools import cache


def links_per_chip(shape: Sequence[int]) -> int:
    """Links one chip has on the torus: two per dimension."""
    return 2 * len(shape)


def _coords(shape: tuple[int, ...], position: int) -> tuple[int, ...]:
    out = []
    for size in reversed(shape):
        position, c = divmod(position, size)
        out.append(c)
    return tuple(reversed(out))


def _position(shape: tuple[int, ...], coords: Iterable[int]) -> int:
    position = 0
    for size, c in zip(shape, coords, strict=True):
        position = position * size + c % size
    return position


def neighbours(shape: tuple[int, ...], position: int) -> frozenset[int]:
    """The positions one link away."""
    here = _coords(shape, position)
    out = set()
    for axis in range(len(shape)):
        for step in (-1, 1):
            there = list(here)
            there[axis] += step
            out.add(_position(shape, there))
    out.discard(position)
    return frozenset(out)


def _has_cycle(shape: tuple[int, ...], members: frozenset[int]) -> bool:
    """Whether a cycle of direct links passes every member once (a
    Hamiltonian cycle of the members' links), by depth-first search."""
    near = {m: neighbours(shape, m) & members for m in members}
    if len(members) < 3 or any(len(n) < 2 for n in near.values()):
        return False
    if all(size % 2 == 0 for size in shape):
        # Even sides: neighbours differ in the parity of their coordinates'
        # sum, so a cycle passes as many even positions as odd ones.
        even = sum(1 for m in members if sum(_coords(shape, m)) % 2 == 0)
        if 2 * even != len(members):
            return False
    start = min(members)

    def stranded(path: list[int], seen: set[int]) -> bool:
        """A member not yet passed with fewer than two ways in and out left."""
        ends = {start, path[-1]}
        return any(len(near[m] - (seen - ends)) < 2 for m in members - seen)

    def extend(path: list[int], seen: set[int]) -> bool:
        if len(path) == len(members):
            return start in near[path[-1]]
        if stranded(path, seen):
            return False
        for nxt in sorted(near[path[-1]] - seen):
            seen.add(nxt)
            path.append(nxt)
            if extend(path, seen):
                return True
            path.pop()
            seen.discard(nxt)
        return False

    return extend([start], {start})


@cache
def ring_links(shape: tuple[int, ...], members: frozenset[int]) -> int:
    """Links per chip a ring over `members` keeps busy (the rules above)."""
    if len(members) == math.prod(shape) and min(shape) >= 3:
        return links_per_chip(shape)
    return 2 if _has_cycle(shape, members) else 1
