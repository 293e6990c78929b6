"""The levels of a rack's chip-to-chip fabric as data: for each generation,
what one chip can send per second across each level and the latency of one
algorithm step across it, each figure with its source, and the torus a
level's links form where they form one (Trn2's); and where a rank's chip
sits (rack, server, chip on the server), which decides the level between
two ranks.

Sources are named by page and section (docs/simulator.md, "Collectives",
says which AWS figure applies to which level and why). Latencies have no
per-level AWS figure: the values are the simulator's choices inside the
per-hop range AWS gives for ring steps, and say so.
"""

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from simdevice.topology import RackSpec, TopologyError, chip_places
from simdevice.torus import links_per_chip

SERVER, RACK, RACKS = "intra-server", "inter-server", "inter-rack"
LEVEL_NAMES: tuple[str, ...] = (SERVER, RACK, RACKS)
"""Innermost first: a pair of ranks talks across the innermost level that holds both."""

TRN3_EC2 = "Neuron docs, Amazon EC2 Trn3 Architecture page"
TRN2_EC2 = "Neuron docs, Amazon EC2 Trn2 Architecture page"
INTRANODE_PAGE = "Neuron docs, Intra-node Collective Communications page"
INTRANODE = f"{INTRANODE_PAGE}, Overview"
INTERNODE = "Neuron docs, Inter-node Collective Communications page"
MODEL_LATENCY = (
    f"no per-level AWS figure: the simulator's choice inside the 1-2 us per ring hop of {INTRANODE}"
)


@dataclass(frozen=True)
class FabricLevel:
    """One level of the fabric as one chip sees it."""

    name: str  # one of LEVEL_NAMES
    bandwidth: float  # bytes/s one chip sends across this level (each direction)
    latency: float  # seconds of one algorithm step across this level
    what: str  # the links, in a few words
    bandwidth_source: str
    latency_source: str
    torus: tuple[int, ...] = ()
    """The torus (or ring) this level's links form, sides in positions; empty
    for a switched level, where a chip reaches every other at the full
    figure. On a torus the figure is split evenly over the chip's links and a
    ring gets those it rides (simdevice.torus)."""

    def __post_init__(self) -> None:
        if self.name not in LEVEL_NAMES:
            raise TopologyError(f"name: unknown fabric level {self.name!r}; valid: {LEVEL_NAMES}")
        if not self.bandwidth > 0:
            raise TopologyError(f"bandwidth: must be > 0 bytes/s, got {self.bandwidth!r}")
        if not self.latency > 0:
            raise TopologyError(f"latency: must be > 0 seconds, got {self.latency!r}")
        if any(side < 3 for side in self.torus):
            raise TopologyError(f"torus: every side must be >= 3 positions, got {self.torus!r}")

    @property
    def link_bandwidth(self) -> float:
        """Bytes/s of one of the chip's links (each direction): the figure on a switch."""
        return self.bandwidth / links_per_chip(self.torus) if self.torus else self.bandwidth


_TRN3 = (
    FabricLevel(
        SERVER,
        256e9,
        1.0e-6,
        "4 x PCIe Gen6 x8 to the server's switch",
        f"{TRN3_EC2}, Bandwidth summary (intra-server)",
        MODEL_LATENCY + " (its low end: one switch)",
    ),
    FabricLevel(
        RACK,
        320e9,
        2.0e-6,
        "5 x PCIe Gen6 x8 to the rack's inter-server switches",
        f"{TRN3_EC2}, Bandwidth summary (inter-server)",
        MODEL_LATENCY + " (its high end: two switch levels)",
    ),
    FabricLevel(
        RACKS,
        128e9,
        2.0e-6,
        "2 x PCIe Gen6 x8 direct to the chip in the same place of the other rack",
        f"{TRN3_EC2}, Bandwidth summary (inter-rack)",
        MODEL_LATENCY + " (its high end: a direct link, but the longest)",
    ),
)

FABRIC_LEVELS: Mapping[str, tuple[FabricLevel, ...]] = MappingProxyType(
    {
        "trn3-gen2": _TRN3,
        # The page's per-level figures describe 4-chip servers; Gen1's 16-chip
        # servers are the same chip with the same links, so they keep them.
        "trn3-gen1": _TRN3,
        "trn2": (
            FabricLevel(
                SERVER,
                1024e9,
                1.5e-6,
                "NeuronLink-v3, the instance's 4x4 2D torus (4 links a chip)",
                f"{TRN2_EC2}, Trn2 instance specifications (intra-instance NeuronLink-v3 "
                f"per chip); split over the 4 torus neighbours of {INTRANODE_PAGE}, RDH",
                MODEL_LATENCY + " (its middle: torus neighbours)",
                torus=(4, 4),
            ),
            FabricLevel(
                RACK,
                256e9,
                2.0e-6,
                "NeuronLink-v3 ring of the UltraServer's 4 instances, chips of the same "
                "coordinates (2 links a chip)",
                f"{TRN2_EC2}, Trn2 instance specifications (inter-instance NeuronLink-v3 "
                "per chip); split over the 2 neighbours of the Trn2 UltraServer section's ring",
                MODEL_LATENCY + " (its high end)",
                torus=(4,),
            ),
        ),
        # NVLink Fusion is announced without figures: Trn3's fabric stands in.
        "trn4-whatif": _TRN3,
    }
)


def fabric_levels(spec: RackSpec) -> tuple[FabricLevel, ...]:
    """The levels of `spec`'s fabric, innermost first."""
    return FABRIC_LEVELS[spec.generation]


@dataclass(frozen=True, order=True)
class RankPlace:
    """Where one rank's chip is: its rack (numbered by the caller), its server
    in the rack and its index on the server."""

    rack: int
    server: int
    chip: int

    def level_to(self, other: "RankPlace") -> str:
        """The innermost level holding both chips."""
        if self.rack != other.rack:
            return RACKS
        return SERVER if self.server == other.server else RACK


def rank_places(spec: RackSpec, chips: Iterable[tuple[int, int]]) -> list[RankPlace]:
    """Places of rack-wide chip indexes given as (rack, index) pairs, in the
    order given (the ranks' order). Every chip once: one rank per chip."""
    places = chip_places(spec)
    out: list[RankPlace] = []
    for rack, index in chips:
        if not 0 <= index < spec.chips:
            raise TopologyError(
                f"chips: chip {index} is not in a {spec.generation} rack "
                f"(valid: 0..{spec.chips - 1})"
            )
        if rack < 0:
            raise TopologyError(f"chips: rack must be >= 0, got {rack}")
        place = places[index]
        out.append(RankPlace(rack, place.server, place.local_index))
    seen: set[RankPlace] = set()
    for p in out:
        if p in seen:
            raise TopologyError(
                f"chips: rack {p.rack} chip {p.server * spec.chips_per_server + p.chip} "
                "is given twice; the model runs one rank per chip"
            )
        seen.add(p)
    return out


def first_chips(spec: RackSpec, count: int) -> list[RankPlace]:
    """The first `count` chips of one rack, server-major."""
    if not 1 <= count <= spec.chips:
        raise TopologyError(
            f"chips: must be in [1, {spec.chips}] for {spec.generation}, got {count}"
        )
    return rank_places(spec, ((0, i) for i in range(count)))


def levels_spanned(places: Sequence[RankPlace]) -> set[str]:
    """Every level some pair of the ranks talks across."""
    servers = {(p.rack, p.server) for p in places}
    racks = {p.rack for p in places}
    spanned = set()
    if len(servers) < len(places):
        spanned.add(SERVER)
    if len(servers) > len(racks):
        spanned.add(RACK)
    if len(racks) > 1:
        spanned.add(RACKS)
    return spanned
