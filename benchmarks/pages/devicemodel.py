"""docs/device-model.md's generated block: what the `node` pool layout costs
the scheduler at each fleet size and where that CPU goes, from
benchmarks/results/scheduler.json (its `racks` step). The prose around it is
the page's own and reads the mechanism; the figures are only here."""

from typing import Any, Final

from benchmarks.pages.common import conditions_note, replace_block, spread, table, values
from benchmarks.pages.scale import NODE_LAYOUTS
from benchmarks.pages.scheduler import FLEET_ANCHORS, SOURCE, pairwise_ratios

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
    for count, layouts in (r.get("racks") or {}).items():
        anchor = layouts.get(FLEET_ANCHORS[0])
        for name in sorted(NODE_LAYOUTS, key=len):
            runs = layouts.get(name)
            if not runs:
                continue
            versus = pairwise_ratios(runs, anchor, KEY) if anchor else ""
            rows.append(
                [count, name, spread(values(runs, KEY)), versus, *(share(runs, p) for p in PARTS)]
            )
    if not rows:
        return "Not measured yet: `make bench-scheduler BENCH_ARGS='--steps racks'` measures it."
    header = [
        "racks",
        "layout",
        "scheduler CPU ms/pod",
        "vs per-node pools, same devices",
        *(f"{part}, share of samples" for part in PARTS),
    ]
    return "\n".join(
        [
            "From benchmarks/results/scheduler.json (`make bench-scheduler`, its `racks` step; "
            'docs/bench-scheduler.md, "Fleet sizes"): single-core pods, the median of the rounds '
            "with their range.",
            "",
            table(header, rows),
            "",
            conditions_note((r.get("loads") or {}).get("racks"), SOURCE),
        ]
    )


def render(page: str, payload: dict[str, Any]) -> str:
    return replace_block(page, "node-layout", node_layout(payload))
