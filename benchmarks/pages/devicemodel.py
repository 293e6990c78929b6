"""docs/device-model.md's generated block: what the `node` pool layout costs
the scheduler on an empty fleet of each size and where that CPU goes, from
benchmarks/results/scheduler.json (its `occupancy` step, nothing held). The
prose around it is the page's own and reads the mechanism; the figures are
only here."""

from typing import Any, Final

from benchmarks.pages.common import replace_block, spread, table, values
from benchmarks.pages.scheduler import (
    BUSY_ANCHOR,
    NODE_LAYOUT,
    empty_fleets,
    occupancy_notes,
    pairwise_ratios,
)

PARTS: Final = ("node selectors", "slice conversion", "counter validation")
"""What the node layout's scheduler spends beyond per-node pools of the same
devices: matching shared slices to the node, converting the server's counter
slice, validating consumption against it."""
KEY: Final = "scheduler_cpu_ms_per_pod"


def share(runs: list[dict[str, Any]], part: str) -> str:
    """A part's share of the profile's samples over the runs that took one."""
    found = [
        float(r["profile"]["parts_cum_percent"][part])
        for r in runs
        if part in (r.get("profile") or {}).get("parts_cum_percent", {})
    ]
    return spread(found, "{:.1f}%") if found else "not taken"


def node_layout(payload: dict[str, Any]) -> str:
    r = payload["results"]
    rows = []
    for count, layouts in empty_fleets(r).items():
        runs, anchor = layouts.get(NODE_LAYOUT), layouts.get(BUSY_ANCHOR)
        if not runs:
            continue
        versus = pairwise_ratios(runs, anchor, KEY) if anchor else ""
        rows.append([count, spread(values(runs, KEY)), versus, *(share(runs, p) for p in PARTS)])
    if not rows:
        return (
            "Not measured yet: `make bench-scheduler BENCH_ARGS='--steps occupancy'` measures it."
        )
    header = [
        "racks",
        "scheduler CPU ms/pod",
        "vs per-node pools, same devices",
        *(f"{part}, share of samples" for part in PARTS),
    ]
    return "\n".join(
        [
            "From benchmarks/results/scheduler.json (`make bench-scheduler`, its `occupancy` "
            'step with nothing held; docs/bench-scheduler.md, "Busy fleets"): the `node` pool '
            f"layout (`{NODE_LAYOUT}` there), single-core pods, the median of the rounds with "
            "their range.",
            "",
            table(header, rows),
            *occupancy_notes(r, [str(row[0]) for row in rows]),
        ]
    )


def render(page: str, payload: dict[str, Any]) -> str:
    return replace_block(page, "node-layout", node_layout(payload))
