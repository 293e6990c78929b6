"""docs/simulator.md's collectives tables, computed from simdevice: the fabric
levels with their sources, the algorithms, and busbw for every operation over
ranks and sizes. `make validate-sim` writes them; tests/simdevice checks the
page against this code."""

from simdevice.collectives import ALGORITHMS, LINK_USE, OPERATIONS, time_collective
from simdevice.fabric import FABRIC_LEVELS, RankPlace, first_chips
from simdevice.topology import GENERATIONS, rack_spec

TABLE_GENERATION = "trn3-gen2"
RANKS: tuple[int, ...] = (2, 4, 8, 16, 32, 64, 144)
SIZES: tuple[int, ...] = (1 << 10, 32 << 10, 1 << 20, 32 << 20, 1 << 30, 4 << 30)
ALGORITHM_STEPS = {
    "ring": "n-1 (all-to-all: one per peer)",
    "rdh": "log2 n (n a power of two; not all-to-all)",
    "mesh": "1",
}


def _size(nbytes: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if nbytes >= 1 << shift:
            return f"{nbytes / (1 << shift):g} {unit}"
    return f"{nbytes} B"


def fabric_table() -> str:
    """One row per generation and level."""
    rows = [
        "| racks | level | links | per chip | step latency | bandwidth source | latency source |",
        "|---|---|---|---|---|---|---|",
    ]
    for generation in GENERATIONS:
        for level in FABRIC_LEVELS[generation]:
            rows.append(
                f"| `{generation}` | {level.name} | {level.what} | "
                f"{level.bandwidth / 1e9:g} GB/s | {level.latency * 1e6:g} us | "
                f"{level.bandwidth_source} | {level.latency_source} |"
            )
    return "\n".join(rows)


def algorithms_table() -> str:
    rows = [
        "| algorithm | steps per phase over n | share of the level's bandwidth |",
        "|---|---|---|",
    ]
    rows += [f"| {a} | {ALGORITHM_STEPS[a]} | {LINK_USE[a]:g} |" for a in ALGORITHMS]
    return "\n".join(rows)


def _placements() -> list[tuple[str, list[RankPlace]]]:
    spec = rack_spec(TABLE_GENERATION)
    rows = [(str(n), first_chips(spec, n)) for n in RANKS]
    rows.append(("2, two racks (chip 0 of each)", [RankPlace(0, 0, 0), RankPlace(1, 0, 0)]))
    return rows


def busbw_tables() -> str:
    """For every operation: busbw in GB/s and the algorithm, by ranks (the
    rack's first chips) and size."""
    spec = rack_spec(TABLE_GENERATION)
    out = []
    for operation in OPERATIONS:
        out += [
            f"**{operation}**, busbw in GB/s and the algorithm chosen:",
            "",
            "| ranks | " + " | ".join(_size(s) for s in SIZES) + " |",
            "|---" * (len(SIZES) + 1) + "|",
        ]
        for name, places in _placements():
            cells = []
            for size in SIZES:
                t = time_collective(operation, spec, places, size)
                cells.append(f"{t.busbw / 1e9:.3g} {t.algorithm}")
            out.append(f"| {name} | " + " | ".join(cells) + " |")
        out.append("")
    return "\n".join(out[:-1])
