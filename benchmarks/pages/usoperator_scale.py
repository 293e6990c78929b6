"""docs/aws-neuron.md's operator scale block, from benchmarks/results/usoperator-scale.json."""

from typing import Any

from benchmarks.pages.common import conditions_note, replace_block, run_line, table

BLOCK = "usoperator-scale"
NOT_RUN = (
    "No run recorded yet: `make bench-usoperator-scale` writes "
    "benchmarks/results/usoperator-scale.json and this block."
)


def figures(r: dict[str, Any]) -> str:
    to = r["to_allocated_seconds"]
    n = r["workloads"]
    rows = [
        (
            "seconds from a workload's create to `Allocated`: p50, p90, max",
            f"{to['p50']:.2f}, {to['p90']:.2f}, {to['max']:.2f}",
        ),
        (f"seconds until all {n} are `Allocated`", f"{r['allocate_wall_seconds']:.2f}"),
        (
            "operator CPU seconds per workload, allocating",
            f"{r['allocate_cpu_seconds_per_workload']:.3f}",
        ),
        (
            f"seconds from deleting all {n} until every node is released",
            f"{r['release_wall_seconds']:.2f}",
        ),
        (
            "operator CPU seconds per workload, releasing",
            f"{r['release_cpu_seconds_per_workload']:.3f}",
        ),
        (
            "operator resident memory once allocated, and its peak (MiB)",
            f"{r['rss_mib_allocated']:.0f}, {r['rss_mib_peak']:.0f}",
        ),
    ]
    return table(("figure", "value"), rows)


def render(page: str, payload: dict[str, Any] | None) -> str:
    if payload is None:
        return replace_block(page, BLOCK, NOT_RUN)
    r = payload["results"]
    shapes = ", ".join(f"{size}\u00d7{count}" for size, count in r["shapes"])
    body = "\n".join(
        [
            f"From benchmarks/results/usoperator-scale.json. {run_line(payload)}",
            "",
            conditions_note(payload.get("conditions"), "benchmarks/results/usoperator-scale.json"),
            "",
            f"{r['racks']} Trn3 Gen1 UltraServers ({r['nodes']} nodes); {r['workloads']} "
            f"workloads created at once, their `topologySize`\u00d7`serverCount` in turn "
            f"{shapes} ({r['nodes_allocated']} nodes in all), then deleted at once. The "
            f"workloads listed every {r['poll_seconds']:g} s; the operator's CPU and memory "
            "read from /proc. Every allocation checked: no node in two workloads, each "
            "group one node, pair or quad, each UltraServer one group of a workload. One run.",
            "",
            figures(r),
        ]
    )
    return replace_block(page, BLOCK, body)
