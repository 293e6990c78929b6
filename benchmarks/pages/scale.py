"""docs/scale.md, toward a million accelerators: how publishing, storage, the
controller and the scheduler grow with the number of Trn3 Gen2 racks, from
benchmarks/results/controller.json (publishing at several rack counts),
scale.json (the scheduler at several rack counts), storage.json (a rack in
etcd) and scheduler.json (busy and empty fleets). A figure measured at three or
more rack counts is fitted with a line and read off at 6,944 racks, with how
far each point sits from its line; one measured at fewer is shown as measured
and not projected."""

from typing import Any, Final

from benchmarks.pages import countersfirst, storage
from benchmarks.pages.common import conditions_note, median, run_line
from benchmarks.pages.controller import ours_runs
from benchmarks.pages.scheduler import (
    BUSY_ANCHOR,
    NODE_LAYOUT,
    empty_fleets,
    occupancy_notes,
    pairwise_ratios,
)
from benchmarks.scalefit import (
    CHIPS_PER_GEN2_RACK,
    MILLION_CHIP_RACKS,
    PROJECTION_MIN_POINTS,
    SCHEDULER_RACKS,
    SCHEDULER_RUN_HOURS,
    Line,
    fit,
)

ETCD_QUOTA_DEFAULT: Final = 2 * 2**30
"""etcd's default backend quota (`--quota-backend-bytes` unset): 2 GiB."""
ETCD_QUOTA_MAX_SUGGESTED: Final = 8 * 2**30
"""The largest quota etcd's documentation suggests: 8 GiB."""
RESYNC_DEFAULT_SECONDS: Final = 300.0
"""The controller's default `--resync-seconds`."""
TITLES: Final = {
    "publish_seconds": ("Cold publish, controller start to every rack Ready", "seconds"),
    "slice_objects": ("ResourceSlice objects in the apiserver", "objects"),
    "slice_mib": ("ResourceSlice JSON the apiserver serves", "MiB"),
    "etcd_mib": ("etcd database size", "MiB"),
    "controller_rss_mib": ("Controller resident memory after publishing", "MiB"),
    "noop_pass_seconds": (
        "Controller time for a no-op resync of every rack, one worker",
        "seconds",
    ),
    "scheduler_ms_per_claim": (
        "Scheduler wall time per single-core claim, first created to last bound",
        "ms",
    ),
}


def series(publish: list[dict[str, Any]]) -> dict[str, list[tuple[float, float]]]:
    """(racks, value) points of every figure the publishing runs measured; a
    rack count published several times gives the median of its runs."""
    pts: dict[str, list[tuple[float, float]]] = {k: [] for k in TITLES}
    for p in publish:
        r, runs = float(p["racks"]), ours_runs(p)
        pts["publish_seconds"].append((r, median(runs, "seconds")))
        stored = [run for run in runs if run.get("storage")]
        if stored:
            # Slices the apiserver created during the cold publish: exact, unlike its
            # periodically refreshed object count.
            pts["slice_objects"].append((r, median(stored, "apiserver_slice_writes")))
            storage = [run["storage"] for run in stored]
            pts["slice_mib"].append((r, median(storage, "slice_json_bytes") / 2**20))
            pts["etcd_mib"].append((r, median(storage, "etcd_db_bytes") / 2**20))
        rss = [
            {"rss": run.get("controller_rss_after_bytes") or run["controller_rss_bytes"]}
            for run in runs
            if run.get("controller_rss_after_bytes") or run.get("controller_rss_bytes")
        ]
        if rss:
            pts["controller_rss_mib"].append((r, median(rss, "rss") / 2**20))
        idle = [
            run["noop_resync"] for run in runs if (run.get("noop_resync") or {}).get("ms_per_rack")
        ]
        if idle:
            # A whole pass, so the slope is the cost of one more rack.
            pts["noop_pass_seconds"].append((r, median(idle, "ms_per_rack") * r / 1000))
    return {k: v for k, v in pts.items() if v}


def scheduler_points(scale: dict[str, Any] | None) -> list[tuple[float, float]]:
    if scale is None:
        return []
    return [(float(s["racks"]), s["ms_per_claim"]) for s in scale["results"].get("scheduler") or []]


def lines_of(controller: dict[str, Any], scale: dict[str, Any] | None) -> dict[str, Line]:
    pts = series(controller["results"].get("publish") or [])
    scheduler = scheduler_points(scale)
    if scheduler:
        pts["scheduler_ms_per_claim"] = scheduler
    return {k: fit(v) for k, v in pts.items()}


def offset(x: float) -> str:
    """An offset in whole percent; under half a percent is 0%."""
    return "0%" if abs(x) < 0.005 else f"{100 * x:+.0f}%"


def racks(x: float) -> str:
    return f"{x:g} rack{'' if x == 1 else 's'}"


def header(controller: dict[str, Any], scale: dict[str, Any] | None) -> list[str]:
    out = [
        "# Toward a million accelerators",
        "",
        "Rendered by `make pages` (benchmarks/pages/scale.py) from the results files alone;",
        "every number below is measured or computed from lines fitted to the measured points.",
        "",
        f"Publishing, from benchmarks/results/controller.json. {run_line(controller)}",
        "",
        conditions_note(controller.get("conditions"), "benchmarks/results/controller.json"),
    ]
    if scale is not None and scale["results"].get("scheduler"):
        out += [
            "",
            f"The scheduler, from benchmarks/results/scale.json. {run_line(scale)} "
            f"{scale_points(scale['results']['scheduler'])}",
            "",
            conditions_note(scale.get("conditions"), "benchmarks/results/scale.json"),
        ]
    return out


def scale_points(points: list[dict[str, Any]]) -> str:
    """Which rack counts the scheduler's results hold and how each was taken,
    beside the counts the command measures unless told otherwise."""
    runs = {len(p.get("seconds_runs") or [p]) for p in points}
    taken = (
        "one run each"
        if runs == {1}
        else f"the median of {spoken([str(n) for n in sorted(runs)])} runs each"
    )
    claims = spoken([f"{n:,}" for n in sorted({p["claims"] for p in points})])
    racks = spoken([f"{p['racks']:g}" for p in points])
    return f"It holds {racks} racks, {claims} single-core claims at each, {taken}; {default_run()}."


def default_run() -> str:
    """What `make bench-scale` measures unless told otherwise, and the time it is sized for."""
    return (
        f"`make bench-scale` measures {spoken([str(n) for n in SCHEDULER_RACKS])} racks, "
        f"smallest first, a run sized to end within {SCHEDULER_RUN_HOURS} hour on a machine "
        "of 2 CPUs, unless `--scheduler-racks` says otherwise"
    )


def document(
    controller: dict[str, Any],
    scale: dict[str, Any] | None,
    scheduler: dict[str, Any] | None,
    stored: dict[str, Any] | None = None,
) -> str:
    """The whole page."""
    lines = lines_of(controller, scale)
    projected = {k: line for k, line in lines.items() if line.projects()}
    kept = {k: line for k, line in lines.items() if not line.projects()}
    counts = ", ".join(f"{x:g}" for x, _ in lines["publish_seconds"].points)
    out = [
        *header(controller, scale),
        "",
        f"One million Trainium3 chips are {MILLION_CHIP_RACKS:,} Trn3 Gen2 racks of "
        f"{CHIPS_PER_GEN2_RACK} chips",
        f"({MILLION_CHIP_RACKS * CHIPS_PER_GEN2_RACK:,} chips). Each rack is one pool of "
        "42 ResourceSlices (2,197",
        f"devices in partitioned mode). Publishing was measured at {counts} racks. A figure",
        f"measured at {PROJECTION_MIN_POINTS} or more rack counts is fitted with a straight "
        "line (least squares:",
        "intercept + slope x racks) and read off at 6,944 racks; the table gives how far",
        "the furthest measured point sits from its line, and the list below gives every",
        "point's offset (the line's value minus the point, relative to the point). A figure",
        "measured at fewer rack counts is not projected: a line through "
        f"{PROJECTION_MIN_POINTS - 1}",
        "points fits them exactly whatever the cost does, so it would say nothing past them.",
        "",
        "| figure | per rack (slope) | fixed part | at 6,944 racks "
        "| furthest point from its line |",
        "| --- | --- | --- | --- | --- |",
    ]
    for key, line in projected.items():
        title, unit = TITLES[key]
        worst = max(line.offsets(), key=abs)
        out.append(
            f"| {title} ({unit}) | {line.slope:,.3f} | {line.intercept:,.1f} | "
            f"{line.at(MILLION_CHIP_RACKS):,.0f} | {offset(worst)} |"
        )
    out += ["", "Measured points (offset of the line from each):", ""]
    for key, line in projected.items():
        title, unit = TITLES[key]
        pts = ", ".join(
            f"{racks(x)}: {y:,.2f} ({offset(o)})"
            for (x, y), o in zip(line.points, line.offsets(), strict=True)
        )
        out.append(f"- {title} ({unit}): {pts}")
    for key, line in kept.items():
        title, unit = TITLES[key]
        pts = ", ".join(f"{racks(x)}: {y:,.2f}" for x, y in line.points)
        out.append(
            f"- {title} ({unit}): {pts}; not projected: {len(line.points)} rack "
            f"count{'s' if len(line.points) != 1 else ''}, fewer than {PROJECTION_MIN_POINTS}"
        )
    out.append("")
    for key in projected:
        title, _ = TITLES[key]
        out += [f"![{title}](images/{plot_name(key)})", ""]
    at = {k: line.at(MILLION_CHIP_RACKS) for k, line in projected.items()}
    out += breaks(at, per_slice_bytes(lines))
    out += scheduler_part(lines.get("scheduler_ms_per_claim"), scheduler)
    out += memory_and_resync(at, lines)
    out += cold_publish(at, per_slice_bytes(lines))
    out += storage.section(stored)
    out += countersfirst.section(scheduler)
    return "\n".join(out) + "\n"


def plot_name(key: str) -> str:
    return f"scale-{key}.png"


def per_slice_bytes(lines: dict[str, Line]) -> float:
    """Mean JSON bytes of one slice at the largest measured size."""
    if "slice_mib" not in lines or "slice_objects" not in lines:
        return 0.0
    mib, objects = lines["slice_mib"].points[-1][1], lines["slice_objects"].points[-1][1]
    return mib * 2**20 / objects if objects else 0.0


def breaks(at: dict[str, float], slice_bytes: float) -> list[str]:
    """What gives out first among the projected figures."""
    out = ["## What breaks first, and the design answer", ""]
    etcd = at.get("etcd_mib", 0.0) * 2**20
    slices = at.get("slice_mib", 0.0) * 2**20
    if etcd:
        out += [
            "**etcd's size.** The projected database file right after a cold publish onto",
            "an etcd whose history was compacted and defragmented (the publish's own",
            f"history not compacted yet) is {etcd / 2**30:,.1f} GiB, against etcd's default "
            f"quota of {ETCD_QUOTA_DEFAULT / 2**30:.0f} GiB and the",
            f"{ETCD_QUOTA_MAX_SUGGESTED / 2**30:.0f} GiB its documentation suggests as the "
            "most. `make bench-storage` measures how many racks each quota holds,",
            'with the history compacted, per layout: the section below, "What one rack',
            "stores in etcd, by layout\". Single objects are far from etcd's 1.5 MiB",
            "request limit (one slice holds at most 64 devices with counters).",
            "Design answer: publish less per device. Most of a slice is attributes that",
            "repeat on every device of a rack (generation, core version, rack id, switch",
            "layers); moving rack-wide facts to the DeviceClass or a per-rack object and",
            "publishing partitions only at the sizes a site actually requests (not every",
            "1/2/4/8-core split) shrinks the pool several times; beyond that, a dedicated",
            "etcd for `resource.k8s.io` (`--etcd-servers-overrides`).",
            "",
        ]
    if slices:
        out += [
            "**Watch fan-out.** Every watcher of all slices (the scheduler, autoscalers, "
            "each controller",
            f"replica) receives {slices / 2**30:,.1f} GiB when it starts or relists, and "
            "every rewritten pool again.",
            "Our controller watches slice metadata only (a few hundred bytes a slice) and",
            "keeps no slice bodies, so it does not add to this; the scheduler must hold",
            "them all. Design answer: the same size reduction as for etcd, and partitioned",
            "pools rewritten only when their devices change (a health change rewrites one",
            "rack, never the fleet).",
            "",
        ]
    return out


DESIGN_SCHEDULER: Final = [
    "`make bench-scale` measures the `rack` pool layout: for every node and pod the",
    "allocator converts and checks the node's whole rack pool, so a pod costs the racks'",
    "devices times the nodes it filters. Design answer: the `node` pool layout",
    '(docs/device-model.md, "Pool layouts"), whose server pools the scheduler reads',
    "per node from Kubernetes 1.37 on, with the rack device kept apart by the",
    "controller's guard; `make bench-scheduler` measures the layouts beside per-node",
    'pools at 1, 10 and 100 racks, empty and busy (docs/bench-scheduler.md, "Busy',
    'fleets"). Beyond it: keep workloads rack-scoped (a CEL selector or node affinity',
    "on the UltraServer label), publish only the partition sizes a site uses",
    "(`spec.partitionSizes`), and partition nodes among scheduler profiles or schedulers.",
    "",
]


def node_layout_part(scheduler: dict[str, Any] | None) -> list[str]:
    """The node pool layout against per-node pools of the same devices on an
    empty fleet of each size `make bench-scheduler` measured, with the
    conditions of those runs."""
    r = (scheduler or {}).get("results") or {}
    key = "scheduler_cpu_ms_per_pod"
    said: dict[str, str] = {}
    for count, layouts in empty_fleets(r).items():
        runs, anchor = layouts.get(NODE_LAYOUT), layouts.get(BUSY_ANCHOR)
        if runs is None or anchor is None:
            continue
        said[count] = (
            f"{racks(float(count))}: {median(runs, key):,.1f} ms, "
            f"ratio {pairwise_ratios(runs, anchor, key)}"
        )
    if not said:
        return []
    return [
        "Measured since, with the `node` pool layout on an empty fleet (median scheduler CPU",
        "per single-core pod, then its ratio to per-node pools of the same devices in the",
        'same rounds, median and range; docs/bench-scheduler.md, "Busy fleets", 0% held): '
        + "; ".join(said.values())
        + ".",
        *occupancy_notes(r, said),
        "",
    ]


OTHER_SCHEDULER_MEASURES: Final = [
    "`make bench-scheduler` measures the same cost in two other ways, each named with",
    "what it counts: the wall time per pod of filling one whole rack (its `layouts`",
    "step) and the scheduler process's own CPU time per pod (docs/bench-scheduler.md,",
    '"Busy fleets"), which other work on the machine hardly stretches.',
    "",
]


def scheduler_part(measured: Line | None, scheduler: dict[str, Any] | None) -> list[str]:
    """What the scheduler's wall time per claim says across rack counts (its
    points are stated once, in the table or the list above), and where the
    other measures of the same cost are."""
    if measured is None:
        head = (
            "**Scheduler per-pod cost.** Not measured at several rack counts, so not "
            f"projected: {default_run()}."
        )
    else:
        pts = measured.points
        growth = growth_sentence(measured) if len(pts) > 1 and pts[0][1] else ""
        where, after = (
            ("The table above projects it from", "")
            if measured.projects()
            else ("The list above gives it at", " Too few rack counts to project to 6,944 racks.")
        )
        head = (
            f"**Scheduler per-pod cost.** {where} "
            + spoken([f"{x:g}" for x, _ in pts])
            + " racks as a wall time: from the first claim created to the last pod bound, "
            "divided by the claims, so it also holds creating them and whatever else ran on "
            f"the machine's CPUs.{growth}{after}"
        )
    return [head, *DESIGN_SCHEDULER, *OTHER_SCHEDULER_MEASURES, *node_layout_part(scheduler)]


def growth_sentence(measured: Line) -> str:
    """How the cost grew from the fewest racks measured to the most, and, when
    faster than the racks, that a straight line through the points falls below
    them past the last: a projection from it is a floor, not an estimate."""
    (x0, y0), (x1, y1) = measured.points[0], measured.points[-1]
    said = f" It grew {y1 / y0:,.1f}x for {x1 / x0:g}x the racks."
    if y1 / y0 <= x1 / x0 or not measured.projects():
        return said
    furthest = max(measured.offsets(), key=abs)
    return (
        f"{said} That is faster than the racks grew, so the straight line (its furthest "
        f"point {offset(furthest)} off) falls below the cost past {x1:g} racks: its value "
        "at 6,944 racks is a floor."
    )


def spoken(items: list[str]) -> str:
    """`a`, `a and b`, `a, b and c`."""
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def memory_and_resync(at: dict[str, float], lines: dict[str, Line]) -> list[str]:
    if "controller_rss_mib" not in at:
        return []
    furthest = max(lines["controller_rss_mib"].offsets(), key=abs)
    resync = at.get("noop_pass_seconds")
    resync_text = (
        f"and a no-op resync pass of every rack takes {resync:,.0f} s of one worker "
        f"({'within' if resync < RESYNC_DEFAULT_SECONDS else 'beyond'} the default period of "
        f"{RESYNC_DEFAULT_SECONDS:.0f} s)."
        if resync is not None
        else "(the no-op resync has too few rack counts to project)."
    )
    return [
        "**Controller memory and resync.** The fitted resident memory at 6,944 racks is "
        f"{at['controller_rss_mib'] / 1024:,.1f} GiB, from points up to "
        f"{abs(furthest):.0%} off their line,",
        resync_text,
        "Per rack the controller keeps only a digest of its inputs, its slices'",
        "resourceVersions and the status facts (the device layout is shared by every",
        "rack of a generation); the resident figure also holds the interpreter's",
        "high-water mark from encoding and decoding slices while publishing, so the",
        "fitted slope is an upper bound. Design answer when one replica is not",
        "enough: shard racks across controller replicas by a label (each replica",
        "reconciles the UltraServers whose shard label it owns, one Lease per shard)",
        "and give each shard its own metadata watch filtered by the same label.",
        "",
    ]


def cold_publish(at: dict[str, float], slice_bytes: float) -> list[str]:
    if "publish_seconds" not in at:
        return []
    return [
        "**Cold publish.** The fitted time to publish all 6,944 racks from nothing is "
        f"{at['publish_seconds'] / 3600:,.1f} h",
        f"here, bound by the apiserver's work per {slice_bytes / 1024:,.0f} KiB slice "
        "(the upstream controller,",
        "publishing the same slices, is measured beside ours in docs/bench-controller.md).",
        "A fleet is brought up rack by rack, so this is a one-off cost; sharded",
        "replicas and apiservers publish in parallel.",
        "",
    ]
