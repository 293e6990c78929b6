"""docs/simulator.md's collectives blocks, from benchmarks/results/sim-collectives.json
alone: the run's command and commit, the fabric levels with their sources,
the algorithms, and busbw for every operation by ranks and size on each
generation the file holds."""

from collections.abc import Mapping, Sequence
from typing import Any

from benchmarks.pages.common import recorded, replace_block, table

GB = 1e9
TABLE_BLOCKS: Mapping[str, str] = {"trn3-gen2": "collectives", "trn2": "collectives-trn2"}


def _gb(rate: float) -> str:
    """GB/s to three significant figures, never in exponent form."""
    value = rate / GB
    return f"{value:,.0f}" if value >= 1000 else f"{value:.3g}"


def _size(nbytes: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if nbytes >= 1 << shift:
            return f"{nbytes / (1 << shift):g} {unit}"
    return f"{nbytes} B"


def run_line(payload: Mapping[str, Any]) -> str:
    c = recorded(payload.get("conditions"), "benchmarks/results/sim-collectives.json")
    dirty = ", with uncommitted changes" if c["git_dirty"] else ""
    return (
        f"Command: `{payload['command']}` — {payload['machine']['date']}, commit "
        f"{c['git_commit'][:10]}{dirty}. Computed from the model, not timed: the "
        "machine's load changes no figure."
    )


def fabric_table(model: Mapping[str, Any]) -> str:
    """One row per generation and level."""
    rows = []
    for found in model["fabric"]:
        generation = found["generation"]
        for level in found["levels"]:
            torus = level["torus"]
            per_link = (
                f"{level['link_bandwidth'] / GB:g} GB/s x {2 * len(torus)} "
                f"({'x'.join(map(str, torus))} {'torus' if len(torus) > 1 else 'ring'})"
                if torus
                else "switched"
            )
            rows.append(
                (
                    f"`{generation}`",
                    level["level"],
                    level["what"],
                    f"{level['bandwidth'] / GB:g} GB/s",
                    per_link,
                    f"{level['latency'] * 1e6:g} us",
                    level["bandwidth_source"],
                    level["latency_source"],
                )
            )
    header = (
        "racks",
        "level",
        "links",
        "per chip",
        "per link",
        "step latency",
        "bandwidth source",
        "latency source",
    )
    return table(header, rows)


def algorithms_table(model: Mapping[str, Any]) -> str:
    rows = [(x["algorithm"], x["steps"], f"{x['link_use']:g}") for x in model["algorithms"]]
    return table(("algorithm", "steps per phase over n", "share of the level's bandwidth"), rows)


def busbw_tables(sizes: Sequence[int], found: Mapping[str, Any]) -> str:
    """For every operation of one generation's tables: busbw in GB/s and the
    algorithm, by row and size."""
    header = ("ranks", *(_size(s) for s in sizes))
    out = []
    for operation in found["operations"]:
        rows = [
            (name, *(f"{_gb(c['busbw'])} {c['algorithm']}" for c in row))
            for name, row in zip(found["rows"], operation["cells"], strict=True)
        ]
        title = f"**{operation['operation']}**, busbw in GB/s and the algorithm chosen:"
        out += [title, "", table(header, rows), ""]
    return "\n".join(out[:-1])


def render(page: str, payload: Mapping[str, Any]) -> str:
    """`page` with the collectives blocks written from the results file."""
    model = payload["results"]["model"]
    page = replace_block(page, "collectives-run", run_line(payload))
    page = replace_block(page, "fabric", fabric_table(model))
    page = replace_block(page, "algorithms", algorithms_table(model))
    results = payload["results"]
    for found in results["tables"]:
        tables = busbw_tables(results["sizes"], found)
        page = replace_block(page, TABLE_BLOCKS[found["generation"]], tables)
    return page
