"""Collectives on the ranks' actual chips: a bandwidth + latency (alpha-beta)
model, hierarchical over the fabric's levels (simdevice.fabric).

One rank per chip. Ranks that fill whole servers evenly (and whole racks
evenly) run hierarchically, as the Neuron runtime's hierarchical algorithm
does: a reduce-scatter runs inside each server first, then between the
servers of a rack on the ranks of the same place, then between racks; an
all-gather runs the same phases outermost first; an all-reduce is the two
back to back; an all-to-all sends each level's share across that level. Each
phase runs at its own level's step latency and bandwidth (on a switched
level its whole figure; on a torus, Trn2's, the links a ring over the
phase's chips rides: simdevice.torus), with its own algorithm:

    ring  n-1 steps (all-to-all: pairwise, one step per peer), full bandwidth
    rdh   log2(n) steps, n a power of two, LINK_USE["rdh"] of the bandwidth
    mesh  one step, LINK_USE["mesh"] of the bandwidth (routed traffic
          over-subscribes links)

Unless one is asked for, each phase takes the fastest that applies (AWS's
runtime picks by size too: mesh for small messages, RDH for mid sizes, ring
for large). Ranks spread unevenly run one flat phase at the slowest bandwidth
and the longest latency of the levels they span. Send-receive (rank pairs
2k, 2k+1) and permute (rank r to r+1) move the buffer once, point to point.

`size` is nccom-test's size(B): the buffer of an all-reduce, all-to-all,
send-receive or permute; the gathered output of an all-gather; the input of a
reduce-scatter. Nothing here shares bandwidth between concurrent collectives.
"""

import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from types import MappingProxyType

from simdevice.fabric import (
    RACK,
    RACKS,
    SERVER,
    FabricLevel,
    RankPlace,
    fabric_levels,
    levels_spanned,
)
from simdevice.topology import RackSpec
from simdevice.torus import ring_links

OPERATIONS: tuple[str, ...] = (
    "all-reduce",
    "all-gather",
    "reduce-scatter",
    "all-to-all",
    "send-receive",
    "permute",
)
ALGORITHMS: tuple[str, ...] = ("ring", "rdh", "mesh")
POINT_TO_POINT: tuple[str, ...] = ("send-receive", "permute")
LINK_USE: Mapping[str, float] = MappingProxyType({"ring": 1.0, "rdh": 0.75, "mesh": 0.5})
"""Share of a level's bandwidth each algorithm keeps. AWS ranks them (Ring
full, RDH partial over-subscription, Mesh over-subscription: Intra-node
Collective Communications page, Algorithm Summary) but gives no numbers: these
are the simulator's."""

BUS_FACTOR: Mapping[str, Callable[[int], float]] = MappingProxyType(
    {
        "all-reduce": lambda r: 2 * (r - 1) / r,
        "all-gather": lambda r: (r - 1) / r,
        "reduce-scatter": lambda r: (r - 1) / r,
        "all-to-all": lambda r: (r - 1) / r,
        "send-receive": lambda _: 1.0,
        "permute": lambda _: 1.0,
    }
)
"""busbw = algbw x factor(ranks): nccom-test's Bus Bandwidth Calculation table."""


class CollectiveError(ValueError):
    """A collective that cannot be timed; the message starts with the field."""


@dataclass(frozen=True)
class Phase:
    """One level's part of a collective, as one rank sees it."""

    level: str
    ranks: int  # ranks in each group talking across this level
    algorithm: str  # ring, rdh, mesh; p2p for send-receive and permute
    steps: int
    bytes_sent: float  # bytes one rank sends in this phase
    duration: float  # seconds
    latency: float  # seconds of it spent on step latency
    bandwidth: float  # bytes/s a ring gets across the level (the slowest, for a flat phase)


@dataclass(frozen=True)
class CollectiveTiming:
    operation: str
    ranks: int
    size: float  # bytes, nccom-test's size(B)
    duration: float  # seconds
    phases: tuple[Phase, ...]

    @property
    def bytes_per_chip(self) -> float:
        return sum(p.bytes_sent for p in self.phases)

    @property
    def steps(self) -> int:
        return sum(p.steps for p in self.phases)

    @property
    def algbw(self) -> float:
        """Bytes per second: size / time (0 for a collective that takes none)."""
        return self.size / self.duration if self.duration > 0 else 0.0

    @property
    def busbw(self) -> float:
        return self.algbw * BUS_FACTOR[self.operation](self.ranks)

    @property
    def algorithm(self) -> str:
        """As nccom-test's --show-algorithm prints it: `hier` for more than one phase."""
        if not self.phases:
            return "none"
        return "hier" if len({p.level for p in self.phases}) > 1 else self.phases[0].algorithm


@dataclass(frozen=True)
class _Link:
    """What a phase crosses: a level, or the slowest of several."""

    level: str
    bandwidth: float
    latency: float


def _whole(level: FabricLevel) -> _Link:
    return _Link(level.name, level.bandwidth, level.latency)


def _path(name: str, hops: Sequence[_Link]) -> _Link:
    """Levels crossed one after another: the slowest bandwidth, the latencies added."""
    return _Link(name, min(x.bandwidth for x in hops), sum(x.latency for x in hops))


def _slowest(name: str, links: Sequence[_Link]) -> _Link:
    """Steps that cross any of `links`: the slowest bandwidth and the longest latency."""
    return _Link(name, min(x.bandwidth for x in links), max(x.latency for x in links))


def _ring_link(level: FabricLevel, groups: Iterable[frozenset[int]]) -> _Link:
    """The level for rings over each group at once (positions on its torus):
    on a switch its whole figure; on a torus the links the worst-placed
    group's ring rides (simdevice.torus)."""
    if not level.torus:
        return _whole(level)
    links = min(ring_links(level.torus, g) for g in groups if len(g) > 1)
    return _Link(level.name, level.link_bandwidth * links, level.latency)


def _same_spots(places: Sequence[RankPlace], by_server: bool) -> bool:
    """Whether every rack (every server, `by_server`) holds the ranks in the
    same places inside it."""
    spots: dict[tuple[int, ...], set[tuple[int, ...]]] = {}
    for p in places:
        outer = (p.rack, p.server) if by_server else (p.rack,)
        spots.setdefault(outer, set()).add((p.chip,) if by_server else (p.server, p.chip))
    return len({frozenset(s) for s in spots.values()}) == 1


def _cost(
    operation: str, algorithm: str, n: int, chunk: float, link: _Link
) -> tuple[int, float, float] | None:
    """(steps, bytes sent, seconds) of one phase over groups of n ranks, or
    None where the algorithm does not apply. `chunk`: for reduce-scatter and
    all-gather what a rank sends to each peer; for all-to-all the piece per
    peer, `n` then counting the peers across the level."""
    sent = (n - 1) * chunk if operation != "all-to-all" else n * chunk
    if algorithm == "ring":
        steps = n - 1 if operation != "all-to-all" else n
    elif algorithm == "mesh":
        steps = 1
    elif operation != "all-to-all" and n & (n - 1) == 0:
        steps = int(math.log2(n))
    else:
        return None
    return steps, sent, steps * link.latency + sent / (link.bandwidth * LINK_USE[algorithm])


def _phase(
    operation: str, algorithm: str | None, *, n: int, chunk: float, link: _Link, ranks: int
) -> Phase:
    """The phase with the given algorithm, or the fastest that applies."""
    tried = (algorithm,) if algorithm else ALGORITHMS
    costs = [(c, a) for a in tried if (c := _cost(operation, a, n, chunk, link)) is not None]
    if not costs:
        raise CollectiveError(
            f"algorithm: {algorithm} does not apply to {operation} over {n} "
            f"{'peers' if operation == 'all-to-all' else 'ranks'} across {link.level} "
            "(rdh needs a power of two and no all-to-all); leave it unset or pick another"
        )
    (steps, sent, seconds), chosen = min(costs, key=lambda ca: ca[0][2])
    return Phase(
        link.level, ranks, chosen, steps, sent, seconds, steps * link.latency, link.bandwidth
    )


def _even_groups(places: Sequence[RankPlace]) -> list[int] | None:
    """Group sizes per level, innermost first (ranks per server, servers per
    rack, racks), when every server and rack holds the same; else None."""
    per_server = Counter((p.rack, p.server) for p in places)
    per_rack = Counter(rack for rack, _ in per_server)
    if len(set(per_server.values())) > 1 or len(set(per_rack.values())) > 1:
        return None
    return [next(iter(per_server.values())), next(iter(per_rack.values())), len(per_rack)]


def _rack_link(levels: Mapping[str, FabricLevel], places: Sequence[RankPlace]) -> _Link:
    """The inter-rack link joins chips in the same place of two racks; when
    the racks hold the ranks in different places, a step also crosses the far
    rack's servers."""
    direct = _whole(levels[RACKS])
    if _same_spots(places, by_server=False):
        return direct
    return _path(RACKS, [direct, _whole(levels[RACK])])


def _server_link(levels: Mapping[str, FabricLevel], places: Sequence[RankPlace]) -> _Link:
    """Between servers: a switch reaches any chip; a ring of servers (Trn2's
    UltraServer) joins chips of the same coordinates, so when the servers
    hold the ranks in different places a step also crosses a torus link."""
    level = levels[RACK]
    servers: dict[int, set[int]] = {}
    for p in places:
        servers.setdefault(p.rack, set()).add(p.server)
    link = _ring_link(level, (frozenset(s) for s in servers.values()))
    if not level.torus or _same_spots(places, by_server=True):
        return link
    inner = levels[SERVER]
    return _path(RACK, [link, _Link(SERVER, inner.link_bandwidth, inner.latency)])


def _level_link(levels: Mapping[str, FabricLevel], places: Sequence[RankPlace], name: str) -> _Link:
    if name == RACKS:
        return _rack_link(levels, places)
    if name == RACK:
        return _server_link(levels, places)
    chips: dict[tuple[int, int], set[int]] = {}
    for p in places:
        chips.setdefault((p.rack, p.server), set()).add(p.chip)
    return _ring_link(levels[SERVER], (frozenset(c) for c in chips.values()))


def time_collective(
    operation: str,
    spec: RackSpec,
    places: Sequence[RankPlace],
    size: float,
    algorithm: str | None = None,
) -> CollectiveTiming:
    """The time of one collective over the ranks on `places` (rank i on
    places[i]) of racks of `spec`, on `size` bytes."""
    if operation not in OPERATIONS:
        raise CollectiveError(f"operation: {operation!r} is not one of {', '.join(OPERATIONS)}")
    if algorithm is not None and algorithm not in ALGORITHMS:
        raise CollectiveError(f"algorithm: {algorithm!r} is not one of {', '.join(ALGORITHMS)}")
    if algorithm is not None and operation in POINT_TO_POINT:
        raise CollectiveError(
            f"algorithm: {operation} goes point to point, no algorithm applies; leave it unset"
        )
    if not size >= 0:
        raise CollectiveError(f"bytes: must be >= 0, got {size}")
    if not places:
        raise CollectiveError("chips: no ranks; give at least one chip")
    levels = {x.name: x for x in fabric_levels(spec)}
    spanned = levels_spanned(places)
    if not spanned <= levels.keys():
        raise CollectiveError(
            f"chips: the ranks span racks, and {spec.generation} racks have no "
            "chip-to-chip link between them (only EFA, which the model does not time); "
            "keep the ranks in one rack"
        )
    n = len(places)
    if n == 1:
        return CollectiveTiming(operation, 1, size, 0.0, ())
    if operation in POINT_TO_POINT:
        return _point_to_point(operation, levels, places, size)
    groups = _even_groups(places)
    if groups is None:
        names = [name for name in levels if name in spanned]
        link = _slowest(names[-1], [_level_link(levels, places, name) for name in names])
        peers = n - 1 if operation == "all-to-all" else n
        phases = [_phase(operation, algorithm, n=peers, chunk=size / n, link=link, ranks=n)]
    else:
        phases = _hierarchical(
            operation, algorithm, levels=levels, places=places, groups=groups, size=size
        )
    repeat = 2 if operation == "all-reduce" else 1
    phases = [
        replace(
            p,
            steps=p.steps * repeat,
            bytes_sent=p.bytes_sent * repeat,
            duration=p.duration * repeat,
            latency=p.latency * repeat,
        )
        for p in phases
    ]
    return CollectiveTiming(operation, n, size, sum(p.duration for p in phases), tuple(phases))


def _hierarchical(
    operation: str,
    algorithm: str | None,
    *,
    levels: Mapping[str, FabricLevel],
    places: Sequence[RankPlace],
    groups: list[int],
    size: float,
) -> list[Phase]:
    """One phase per level the ranks span, innermost first. A rank's chunk
    is size / n; at a level it exchanges the chunks of every rank outside it
    (reduce-scatter, all-gather), or sends each peer across it its piece
    (all-to-all)."""
    n = len(places)
    chunk = size / n
    phases = []
    inner = 1
    for i, (name, count) in enumerate(zip(levels, groups, strict=False)):
        if count > 1:
            link = _level_link(levels, places, name)
            if operation == "all-to-all":
                peers, piece = (count - 1) * inner, chunk
            else:
                peers, piece = count, chunk * math.prod(groups[i + 1 :])
            phases.append(
                _phase(operation, algorithm, n=peers, chunk=piece, link=link, ranks=count)
            )
        inner *= count
    return phases


def _point_to_point(
    operation: str, levels: Mapping[str, FabricLevel], places: Sequence[RankPlace], size: float
) -> CollectiveTiming:
    """Every pair at once; the slowest pair sets the time."""
    n = len(places)
    if operation == "send-receive":
        if n % 2:
            raise CollectiveError(
                f"chips: send-receive pairs ranks 2k and 2k+1; {n} ranks leave one alone, "
                "give an even number"
            )
        pairs = [(places[i], places[i + 1]) for i in range(0, n, 2)]
    else:
        pairs = [(places[i], places[(i + 1) % n]) for i in range(n)]
    phases = []
    for a, b in pairs:
        level = a.level_to(b)
        link = _level_link(levels, (a, b), level)
        seconds = link.latency + size / link.bandwidth
        phases.append(Phase(level, 2, "p2p", 1, size, seconds, link.latency, link.bandwidth))
    slowest = max(phases, key=lambda p: p.duration)
    return CollectiveTiming(operation, n, size, slowest.duration, (slowest,))
