"""`make sim-collectives`: the collectives model's figures for docs/simulator.md,
into benchmarks/results/sim-collectives.json: busbw and the algorithm chosen for
every operation, by ranks and size, on a `trn3-gen2` rack and on a Trn2
UltraServer. Nothing is timed against the clock: the file records the run's
conditions as every benchmark does, and beside the figures the model's inputs
(the fabric levels with their sources and the algorithms' shares); the page
renders both (benchmarks/pages/sim_collectives.py), and a test recomputes them
from the code, so neither the page nor the file can drift from the model.
"""

from typing import Any

from benchmarks.report import Conditions, write_results
from simdevice.collectives import ALGORITHMS, LINK_USE, OPERATIONS, time_collective
from simdevice.fabric import FABRIC_LEVELS, RankPlace, first_chips, rank_places
from simdevice.topology import GENERATIONS, rack_spec

COMMAND = "make sim-collectives"
SIZES: tuple[int, ...] = (1 << 10, 32 << 10, 1 << 20, 32 << 20, 1 << 30, 4 << 30)
TABLE_GENERATIONS: tuple[str, ...] = ("trn3-gen2", "trn2")
ALGORITHM_STEPS = {
    "ring": "n-1 (all-to-all: one per peer)",
    "rdh": "log2 n (n a power of two; not all-to-all)",
    "mesh": "1",
}


def _placements(generation: str) -> list[tuple[str, list[RankPlace]]]:
    """The rows of a generation's tables: the rack's first chips (server-major),
    then the placement its fabric has a level for alone."""
    spec = rack_spec(generation)
    rows = [(str(n), first_chips(spec, n)) for n in (2, 4, 8, 16, 32, 64, 144) if n <= spec.chips]
    if generation == "trn2":
        same = rank_places(spec, [(0, s * spec.chips_per_server) for s in range(spec.servers)])
        rows.append((f"{spec.servers}, one per instance (chip 0 of each)", same))
    else:
        rows.append(("2, two racks (chip 0 of each)", [RankPlace(0, 0, 0), RankPlace(1, 0, 0)]))
    return rows


def model() -> dict[str, Any]:
    """The model's inputs: every generation's fabric levels and the algorithms,
    as lists, so the file keeps their order."""
    return {
        "fabric": [
            {
                "generation": generation,
                "levels": [
                    {
                        "level": level.name,
                        "what": level.what,
                        "bandwidth": level.bandwidth,
                        "link_bandwidth": level.link_bandwidth,
                        "torus": list(level.torus),
                        "latency": level.latency,
                        "bandwidth_source": level.bandwidth_source,
                        "latency_source": level.latency_source,
                    }
                    for level in FABRIC_LEVELS[generation]
                ],
            }
            for generation in GENERATIONS
        ],
        "algorithms": [
            {"algorithm": a, "steps": ALGORITHM_STEPS[a], "link_use": LINK_USE[a]}
            for a in ALGORITHMS
        ],
    }


def compute() -> dict[str, Any]:
    """busbw (bytes/s) and the algorithm, for every generation, operation, row and size."""
    tables = []
    for generation in TABLE_GENERATIONS:
        spec = rack_spec(generation)
        rows = _placements(generation)
        operations = [
            {
                "operation": operation,
                "cells": [
                    [
                        {"busbw": t.busbw, "algorithm": t.algorithm}
                        for t in (time_collective(operation, spec, places, s) for s in SIZES)
                    ]
                    for _, places in rows
                ],
            }
            for operation in OPERATIONS
        ]
        tables.append(
            {"generation": generation, "rows": [n for n, _ in rows], "operations": operations}
        )
    return {"sizes": list(SIZES), "tables": tables}


def main() -> None:
    conditions = Conditions.begin(noisy=True, kubernetes=False)  # computed, not timed
    path = write_results("sim-collectives", COMMAND, {"model": model(), **compute()}, conditions)
    print(f"wrote {path} and the pages")


if __name__ == "__main__":
    main()
