"""docs/scale.md's section on what one rack takes inside etcd, per pool layout
and partition sizes, from benchmarks/results/storage.json, and what measures it
where that file is not there."""

import statistics
from typing import Any, Final

from benchmarks.pages.common import conditions_note, run_line, spread, table
from benchmarks.scalefit import MILLION_CHIP_RACKS

MIB: Final = 2**20
QUOTAS: Final = {"2 GiB (default)": 2 * 2**30, "8 GiB (suggested most)": 8 * 2**30}
"""etcd's default backend quota and the largest its documentation suggests."""


def per_rack(runs: list[dict[str, Any]]) -> float:
    return statistics.median(float(r["etcd_bytes_per_rack"]) for r in runs)


TITLE: Final = "## What one rack stores in etcd, by layout"
WHY: Final = [
    "Every pool layout publishes the same devices, attributes and counters, split over",
    "more or fewer slices; the partition sizes remove devices. What a smaller set costs:",
    "a claim for a partition size a rack does not publish (a 4-core partition where the",
    "rack offers 1 and 2) does not fit that rack, so a site publishes the sizes its",
    "workloads ask for; a whole chip is always there.",
    "",
]


def section(storage: dict[str, Any] | None) -> list[str]:
    if storage is None:
        return [
            TITLE,
            "",
            "Not measured: `make bench-storage` publishes racks in each pool layout and",
            "partition sizes, compacts and defragments etcd before and after, and divides",
            "the bytes etcd has in use by the racks.",
            "",
            *WHY,
        ]
    results = storage["results"]
    runs: dict[str, list[dict[str, Any]]] = results["runs"]
    rows = []
    for name, measured in runs.items():
        size = per_rack(measured)
        rows.append(
            [
                name,
                f"{measured[0]['slices_per_rack']:g}",
                f"{measured[0]['slice_json_bytes_per_rack'] / MIB:,.3f}",
                spread([r["etcd_bytes_per_rack"] / MIB for r in measured], "{:,.3f}"),
                *(f"{quota / size:,.0f}" for quota in QUOTAS.values()),
                "yes" if MILLION_CHIP_RACKS * size <= QUOTAS["8 GiB (suggested most)"] else "no",
            ]
        )
    header = [
        "layout",
        "slices per rack",
        "slice JSON per rack (MiB)",
        "in etcd per rack (MiB)",
        *(f"racks in {q}" for q in QUOTAS),
        f"{MILLION_CHIP_RACKS:,} racks in 8 GiB",
    ]
    repeats = len(next(iter(runs.values())))
    return [
        TITLE,
        "",
        f"From benchmarks/results/storage.json. {run_line(storage)}",
        "",
        conditions_note(storage.get("conditions"), "benchmarks/results/storage.json"),
        "",
        f"{results['racks']} Trn3 Gen2 racks published by the controller, per layout; etcd's",
        "history compacted and its file defragmented before and after, and the bytes it has",
        "in use compared (`etcd_mvcc_db_total_size_in_use_in_bytes`), divided by the racks.",
        f"Median of {repeats} interleaved runs (min\u2013max). The apiserver stores slices as",
        "protobuf, so a rack takes less in etcd than the JSON it serves; whole chips, servers",
        "and the rack device are published in every layout, the partition sizes name the",
        "core partitions besides them (`spec.partitionSizes`).",
        "",
        table(header, rows),
        "",
        *WHY,
    ]
