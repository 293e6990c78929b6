"""What a Trainium UltraServer rack is made of: one declarative table of specs,
the place of every chip in the interconnect, and core numbering under LNC.

Everything here is a plain function of data so the controller (ResourceSlices)
and the node daemon (NEURON_RT_VISIBLE_CORES) compute the same answers.
"""

from collections.abc import Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType

GiB = 1 << 30
MiB = 1 << 20

GENERATIONS: tuple[str, ...] = ("trn3-gen2", "trn3-gen1", "trn2")
PROJECTED_GENERATIONS: tuple[str, ...] = ("trn4-whatif",)
"""Generations modelled only from announced figures: the fleet what-if may time
jobs on them, but no rack of them is published, run or checked."""
VALID_LNC: tuple[int, ...] = (1, 2, 4)
# Sizes of the AWS-style connected device groups (devicegroupN_id).
GROUP_SIZES: tuple[int, ...] = (1, 4, 8, 16)


class TopologyError(ValueError):
    """A spec or core range that makes no sense; the message starts with the field."""


def _require(ok: bool, field: str, problem: str) -> None:
    if not ok:
        raise TopologyError(f"{field}: {problem}")


@dataclass(frozen=True)
class ChipSpec:
    """One Trainium chip. Bandwidths are bytes per second."""

    name: str
    core_version: str
    cores: int
    chiplets: int
    hbm_bytes: int
    hbm_bandwidth: float
    dma_engines: int
    sbuf_bytes_per_core: int
    psum_bytes_per_core: int
    link_bandwidth: float

    def __post_init__(self) -> None:
        _require(bool(self.name), "name", "must not be empty; give the chip a name")
        _require(bool(self.core_version), "core_version", "must not be empty, e.g. neuroncore-v4")
        for field in (
            "cores",
            "chiplets",
            "hbm_bytes",
            "dma_engines",
            "sbuf_bytes_per_core",
            "psum_bytes_per_core",
        ):
            value = getattr(self, field)
            _require(
                isinstance(value, int) and value >= 1,
                field,
                f"must be a positive integer, got {value!r}",
            )
        for field in ("hbm_bandwidth", "link_bandwidth"):
            value = getattr(self, field)
            _require(
                isinstance(value, int | float) and value > 0,
                field,
                f"must be a positive number of bytes per second, got {value!r}",
            )
        _require(
            self.cores % self.chiplets == 0,
            "cores",
            f"{self.cores} cores cannot be split evenly over {self.chiplets} chiplets; "
            "use a multiple of chiplets",
        )
        _require(
            self.dma_engines % self.cores == 0,
            "dma_engines",
            f"{self.dma_engines} engines cannot be split evenly over {self.cores} cores; "
            "use a multiple of cores",
        )

    @property
    def cores_per_chiplet(self) -> int:
        return self.cores // self.chiplets

    @property
    def dma_engines_per_core(self) -> int:
        return self.dma_engines // self.cores

    def chiplet_of(self, core: int) -> int:
        """The chiplet holding physical core `core`."""
        _require(0 <= core < self.cores, "core", f"must be in [0, {self.cores}), got {core}")
        return core // self.cores_per_chiplet


@dataclass(frozen=True)
class RackSpec:
    """One UltraServer rack: `servers` nodes of `chips_per_server` chips."""

    generation: str
    servers: int
    chips_per_server: int
    chip: ChipSpec

    def __post_init__(self) -> None:
        known = GENERATIONS + PROJECTED_GENERATIONS
        _require(
            self.generation in known,
            "generation",
            f"unknown generation {self.generation!r}; valid: {', '.join(known)}",
        )
        for field in ("servers", "chips_per_server"):
            value = getattr(self, field)
            _require(
                isinstance(value, int) and value >= 1,
                field,
                f"must be a positive integer, got {value!r}",
            )
        _require(isinstance(self.chip, ChipSpec), "chip", "must be a ChipSpec, e.g. TRAINIUM3")

    @property
    def chips(self) -> int:
        return self.servers * self.chips_per_server

    @property
    def cores(self) -> int:
        return self.chips * self.chip.cores


TRAINIUM3 = ChipSpec(
    name="trainium3",
    core_version="neuroncore-v4",
    cores=8,
    chiplets=2,
    hbm_bytes=144 * GiB,
    hbm_bandwidth=4.9e12,
    dma_engines=128,
    sbuf_bytes_per_core=32 * MiB,
    psum_bytes_per_core=2 * MiB,
    link_bandwidth=2.56e12,
)

TRAINIUM2 = ChipSpec(
    name="trainium2",
    core_version="neuroncore-v3",
    cores=8,
    chiplets=2,
    hbm_bytes=96 * GiB,
    hbm_bandwidth=2.9e12,
    dma_engines=128,
    sbuf_bytes_per_core=28 * MiB,
    psum_bytes_per_core=2 * MiB,
    link_bandwidth=1.28e12,
)

TRAINIUM4_WHATIF = replace(
    TRAINIUM3,
    name="trainium4-whatif",
    core_version="neuroncore-trn4-whatif",
    hbm_bandwidth=4 * TRAINIUM3.hbm_bandwidth,
)
"""Trainium4 as announced: four times Trainium3's memory bandwidth (its FP8
and FP4 rates are in `simdevice.timing`). No core count, HBM size or
NVLink Fusion bandwidth is published, so those stay Trainium3's: a what-if,
not a specification."""

# The one table of rack specs.
RACKS: Mapping[str, RackSpec] = MappingProxyType(
    {
        "trn3-gen2": RackSpec("trn3-gen2", servers=36, chips_per_server=4, chip=TRAINIUM3),
        "trn3-gen1": RackSpec("trn3-gen1", servers=4, chips_per_server=16, chip=TRAINIUM3),
        "trn2": RackSpec("trn2", servers=4, chips_per_server=16, chip=TRAINIUM2),
    }
)

# Racks of PROJECTED_GENERATIONS: a Trn3 Gen2 rack of Trainium4 chips, as no
# Trainium4 UltraServer has been described.
PROJECTED_RACKS: Mapping[str, RackSpec] = MappingProxyType(
    {
        "trn4-whatif": RackSpec(
            "trn4-whatif", servers=36, chips_per_server=4, chip=TRAINIUM4_WHATIF
        ),
    }
)


def rack_spec(generation: str, *, projected: bool = False) -> RackSpec:
    """The rack of `generation` (one of GENERATIONS, or with `projected` also
    one of PROJECTED_GENERATIONS)."""
    racks = {**RACKS, **PROJECTED_RACKS} if projected else RACKS
    _require(
        generation in racks,
        "generation",
        f"unknown generation {generation!r}; valid: {', '.join(racks)}",
    )
    return racks[generation]


@dataclass(frozen=True)
class ChipPlace:
    """Where one chip sits: in the rack, on its node, and in the interconnect."""

    index: int  # rack-wide chip index, server-major
    server: int  # server index in the rack
    local_index: int  # chip index on its server/node (Neuron runtime device index)
    group_ids: Mapping[int, int]  # AWS-style device groups {1:..,4:..,8:..,16:..}
    network_node_layers: tuple[str, str, str]  # switch-layer ids, top first


def _group_ids(index: int) -> dict[int, int]:
    """Groups of 1/4/8/16 chips that are closest in the interconnect.

    Chips are numbered server-major and, inside a 16-chip Trn2 server, row-major
    over the 4x4 torus, so consecutive runs of 4 are a torus row (a ring) or a
    4-chip NeuronSwitch server, runs of 8 two rows or two servers, runs of 16 a
    whole 16-chip server or four 4-chip servers. A group's id is its rank in the
    rack, unique within the rack.
    """
    return {size: index // size for size in GROUP_SIZES}


def _layers(server: int, local_index: int) -> tuple[str, str, str]:
    """Network nodes above a chip, top first: the rack fabric, the server, and the
    closest group of 4 chips (a torus row or the server's own switch)."""
    quad = local_index // 4
    return ("rack", f"server-{server}", f"server-{server}-quad-{quad}")


def chip_places(spec: RackSpec) -> list[ChipPlace]:
    """Every chip of the rack in rack-index order."""
    places = []
    for index in range(spec.chips):
        server, local_index = divmod(index, spec.chips_per_server)
        places.append(
            ChipPlace(
                index=index,
                server=server,
                local_index=local_index,
                group_ids=MappingProxyType(_group_ids(index)),
                network_node_layers=_layers(server, local_index),
            )
        )
    return places


@dataclass(frozen=True)
class CoreRange:
    """Physical cores [start, start+count) of one chip; chip = local index on the node."""

    chip: int
    start: int
    count: int

    def __post_init__(self) -> None:
        _require(self.chip >= 0, "chip", f"must be >= 0, got {self.chip}")
        _require(self.start >= 0, "start", f"must be >= 0, got {self.start}")
        _require(self.count >= 1, "count", f"must be >= 1, got {self.count}")

    def physical(self) -> range:
        return range(self.start, self.start + self.count)

    def visible_cores(self, lnc: int, cores_per_chip: int) -> list[int]:
        """Host-global logical core ids as NEURON_RT_VISIBLE_CORES uses them:
        chip d owns logical ids d*k .. d*k+k-1 with k = cores_per_chip // lnc."""
        _require(lnc in VALID_LNC, "lnc", f"must be one of {VALID_LNC}, got {lnc}")
        _require(
            cores_per_chip >= 1 and cores_per_chip % lnc == 0,
            "cores_per_chip",
            f"{cores_per_chip} cores cannot be fused {lnc} at a time; use a multiple of lnc",
        )
        _require(
            self.start + self.count <= cores_per_chip,
            "count",
            f"cores [{self.start}, {self.start + self.count}) exceed the chip's "
            f"{cores_per_chip} cores; shrink start or count",
        )
        _require(
            self.start % lnc == 0,
            "start",
            f"{self.start} is not a multiple of lnc={lnc}; align the range to {lnc} cores",
        )
        _require(
            self.count % lnc == 0,
            "count",
            f"{self.count} is not a multiple of lnc={lnc}; use a multiple of {lnc} cores",
        )
        per_chip = cores_per_chip // lnc
        first = self.chip * per_chip + self.start // lnc
        return list(range(first, first + self.count // lnc))
