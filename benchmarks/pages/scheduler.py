"""The `scheduler` section of docs/bench-scheduler.md, from
benchmarks/results/scheduler.json: what the device layout costs the real
kube-scheduler, device orders, and random-mix packing."""

from collections.abc import Iterable
from typing import Any, Final

from benchmarks.pages.common import conditions_note, median, row, single_runs, spread, values

ALGORITHM = "scheduler_scheduling_algorithm_duration_seconds"
LAYOUT_NAMES = {
    "partitioned": "partitioned rack (one pool, counters)",
    "flat": "flat rack (one pool, single cores)",
    "per-node pools": "per-node pools (AWS driver's shape)",
    "calibration": "upstream scheduler_perf shape",
}
TIMED = (
    "seconds",
    "ms_per_pod",
    "pods_per_second",
    "algorithm_ms_per_pod",
    "scheduler_cpu_ms_per_pod",
    "api_requests_per_pod",
    "rate_limited_seconds",
)
WORST_SHARE_MIN_RUNS: Final = 10
"""Packing runs below which a worst share says more about the seeds drawn than
about the allocator: the page then shows each run and no worst case."""


SOURCE: Final = "benchmarks/results/scheduler.json"
STEPS: Final = ("layouts", "orders", "packing", "binpack", "racks", "occupancy", "calibration")
"""What `make bench-scheduler` measures, each step apart with `--steps`."""
HEAD_NOTE: Final = (
    "The steps below (`--steps`) may come from different runs, and the file keeps each "
    "step's conditions: each part says those of the run that measured it."
)
"""The section's head: the file's own conditions are only its last run's."""


def step_note(r: dict[str, Any], step: str) -> list[str]:
    """The conditions of the run that measured `step`."""
    return ["", conditions_note((r.get("loads") or {}).get(step), f"{SOURCE}, step `{step}`")]


def occupancy_step(racks: int | str) -> str:
    """The key of one fleet size's conditions in the occupancy step: each size
    may come from a run of its own (`--busy-racks 100`)."""
    return f"occupancy/{racks}"


def occupancy_notes(r: dict[str, Any], counts: Iterable[str]) -> list[str]:
    """The conditions of the run that measured each of the fleet sizes `counts`;
    sizes measured before each was kept apart share the step's."""
    loads = r.get("loads") or {}
    lines: list[str] = []
    for count in counts:
        fleet = f"{count} rack" if count == "1" else f"{count} racks"
        recorded = loads.get(occupancy_step(count), loads.get("occupancy"))
        source = f"{SOURCE}, step `occupancy` at {fleet}"
        lines += ["", f"The runs at {fleet}:", "", conditions_note(recorded, source)]
    return lines


def runs(layout: dict[str, Any]) -> list[dict[str, Any]]:
    """A layout's repeated runs (older results kept one, flat)."""
    out: list[dict[str, Any]] = layout.get("runs") or [layout]
    return out


def ratio(a: dict[str, Any], b: dict[str, Any], key: str) -> str:
    return f"{median(runs(a), key) / median(runs(b), key):.2f}"


def layouts_part(r: dict[str, Any], layouts: dict[str, Any]) -> list[str]:
    lines = [
        "",
        f"The real kube-scheduler, {r['claims']} claims of one device each (one pod per",
        "claim), from the first create to the last pod bound: `seconds`, and per pod",
        "`wall ms/pod`, which hold creating the claims and pods too. `algorithm` is the",
        f"scheduler's own `{ALGORITHM}` per pod: the wall time it spent",
        "deciding, without the API writes and queueing around it. `scheduler CPU` is",
        "the CPU time the kube-scheduler process used per pod: other work on the",
        "machine stretches wall times, hardly CPU times, so it is the fairest ratio.",
        "`API requests/pod` and `rate-limited s` are the scheduler client's own",
        "counts: its requests, and their waits for its rate limiter, summed over",
        f"requests (client QPS and burst {r['scheduler_qps']}, as upstream's",
        "scheduler_perf; the kube-scheduler's own default is 50 and 100). Layouts run",
        "more than once, in turn, show the median with the range in brackets:",
        "",
        row(
            "layout",
            "nodes",
            "slices",
            "devices",
            "seconds",
            "wall ms/pod",
            "pods/s",
            "algorithm ms/pod",
            "scheduler CPU ms/pod",
            "API requests/pod",
            "rate-limited s",
            "bound",
        ),
        row(*["---"] * 12),
    ]
    for key, x in layouts.items():
        done = runs(x)
        lines.append(
            row(
                LAYOUT_NAMES[key],
                x.get("nodes", 36),
                x["slices"],
                x["devices"],
                *(spread(values(done, k), "{:,.2f}") for k in TIMED),
                "/".join(str(d["bound"]) for d in done),
            )
        )
    lines += single_runs([len(runs(x)) for x in layouts.values()])
    if "partitioned" in layouts and "flat" in layouts:
        p, f = layouts["partitioned"], layouts["flat"]
        lines += [
            "",
            f"Partitioned / flat, medians: **{ratio(p, f, 'scheduler_cpu_ms_per_pod')}x** in"
            f" scheduler CPU, {ratio(p, f, 'algorithm_ms_per_pod')}x in the scheduling"
            f" algorithm, {ratio(p, f, 'seconds')}x end to end (goal <= 1.3x).",
        ]
    if "layouts" in measured_steps(r):
        lines += step_note(r, "layouts")
    if "calibration" in layouts:
        c = layouts["calibration"]
        quoted = "; ".join(
            f"{name}: threshold {t}, typically above {typ} pods/s"
            for name, (t, typ) in r["upstream_thresholds"].items()
        )
        lines += [
            "",
            f"Calibration: {c['nodes']} nodes of {r['calibration_devices_per_node']} devices,"
            " claims from a ResourceClaimTemplate, as upstream's",
            f"SchedulingWithResourceClaimTemplate. Upstream ({r['upstream_config']}) publishes",
            f"for it {quoted}, measured with an in-process scheduler whose client",
            "QPS/burst is 5000 (scheduler_perf util.go); here the kube-scheduler binary,",
            "its apiserver, etcd and this client share the machine's CPUs with other work, so",
            "the comparison gives the order of magnitude, not a ratio.",
            f"Here: **{spread(values(runs(c), 'pods_per_second'))} pods/s**.",
            *step_note(r, "calibration"),
        ]
    return lines


def orders_part(orders: dict[str, Any], layouts: dict[str, Any]) -> list[str]:
    lines = [
        "",
        "Device orders inside each server slice of the partitioned layout (the",
        "allocator is first-fit: slices by name, then devices in order). Packing is the",
        "random mix of the first seed sorted by decreasing size:",
        "",
        row(
            "order",
            "single-core seconds",
            "algorithm ms/pod",
            "scheduler CPU ms/pod",
            "decreasing mix packed",
        ),
        row(*["---"] * 5),
    ]
    counted: list[int] = []
    for name, o in orders.items():
        s, d = o.get("single_core") or layouts.get("partitioned"), o["decreasing"]
        if s is None:
            continue
        done = runs(s)
        lines.append(
            row(
                name,
                spread(values(done, "seconds")),
                spread(values(done, "algorithm_ms_per_pod")),
                spread(values(done, "scheduler_cpu_ms_per_pod")),
                f"{d['allocated_cores']}/{d['cores_requested']}",
            )
        )
        counted.append(len(done))
    return lines + single_runs(counted)


def packing_part(packing: list[dict[str, Any]], goal: float) -> list[str]:
    lines = [
        "",
        "Random mixes of 1/2/4/8-core claims filling exactly one partitioned rack, all",
        f"created at once in random order (goal: a share >= {goal} in every run):",
        "",
        row("seed", "claims", "cores allocated", "share"),
        row(*["---"] * 4),
        *(
            row(
                p["seed"], p["claims"], f"{p['allocated_cores']}/{p['cores_requested']}", p["ratio"]
            )
            for p in packing
        ),
        "",
    ]
    below = sum(1 for p in packing if p["ratio"] < goal)
    if len(packing) < WORST_SHARE_MIN_RUNS:
        lines.append(
            f"{below} of {len(packing)} runs below the goal. {len(packing)} runs are too few "
            f"for a worst share (at least {WORST_SHARE_MIN_RUNS})."
        )
    else:
        worst = min(p["ratio"] for p in packing)
        lines.append(f"{below} of {len(packing)} runs below the goal; worst share **{worst}**.")
    return lines


FLEET_ANCHORS: Final = ("per-node pools (same devices)", "per-node pools")
"""The per-node shapes each layout is divided by, round by round: the same
devices without counters, and the same cores as single-core devices."""
FLEET_GOAL: Final = 1.3
"""Scheduler CPU per pod of our layout over per-node pools of the same devices."""


def pairwise_ratios(mine: list[dict[str, Any]], anchor: list[dict[str, Any]], key: str) -> str:
    """Round-by-round ratios (run i of each layout ran in the same round)."""
    return spread([float(a[key]) / float(b[key]) for a, b in zip(mine, anchor, strict=False)])


def racks_part(racks: dict[str, dict[str, list[dict[str, Any]]]]) -> list[str]:
    """Our pool layouts beside the per-node anchors at each fleet size."""
    lines = [
        "",
        "### Fleet sizes",
        "",
        "Unpinned single-core claims (one pod each) on 1, 10 or 100 Trn3 Gen2 racks, the",
        "layouts taking turns round by round: our pool layouts, the node pool",
        "layout with single-core partitions only or with a window of one advertised rack",
        "(only the first rack publishes its rack device, as the controller does with",
        "`--advertised-racks 1` while every rack is free), and two per-node anchors (one pool and",
        "one `spec.nodeName` slice per node, no counters): the node pools' devices, and",
        "the same cores as single-core devices. `vs` divides each round's scheduler CPU",
        "per pod by the anchor's in the same round (median and range of the rounds).",
        "",
        row(
            "racks",
            "layout",
            "nodes",
            "slices",
            "pods",
            "scheduler CPU ms/pod",
            "vs same devices",
            "vs single cores",
            "pods/s",
        ),
        row(*["---"] * 9),
    ]
    key = "scheduler_cpu_ms_per_pod"
    for count, layouts in racks.items():
        for name, runs_ in layouts.items():
            versus = [
                pairwise_ratios(runs_, layouts[a], key)
                if a in layouts and name not in FLEET_ANCHORS
                else ""
                for a in FLEET_ANCHORS
            ]
            lines.append(
                row(
                    count,
                    name,
                    runs_[0]["nodes"],
                    runs_[0]["slices"],
                    runs_[0]["pods"],
                    spread(values(runs_, key)),
                    *versus,
                    spread(values(runs_, "pods_per_second"), "{:,.1f}"),
                )
            )
    lines += [
        "",
        f"Goal: scheduler CPU per pod at most {FLEET_GOAL}x per-node pools of the same devices.",
    ]
    return lines


def profile_part(
    racks: dict[str, dict[str, list[dict[str, Any]]]], label: str = "racks"
) -> list[str]:
    """Where the scheduler's CPU went, from the runs that took a profile;
    `label` names what the outer keys are."""
    profiled = {
        count: {
            name: [r["profile"] for r in runs_ if "profile" in r] for name, runs_ in layouts.items()
        }
        for count, layouts in racks.items()
    }
    parts = list(
        dict.fromkeys(
            part
            for layouts in profiled.values()
            for profiles in layouts.values()
            for p in profiles
            for part in p["parts_cum_percent"]
        )
    )
    if not parts:
        return []
    seconds = next(
        r["profile_seconds"]
        for layouts in racks.values()
        for runs_ in layouts.values()
        for r in runs_
        if "profile_seconds" in r
    )
    lines = [
        "",
        "#### Where the scheduler's CPU goes",
        "",
        f"A CPU profile of the kube-scheduler over the first {seconds} s of each run",
        "(`--profile-seconds`): the share of its samples spent in each part, inclusive",
        "of what the part calls (median and range of the rounds). The parts nest: the",
        "DRA Filter holds pool gathering, device selectors and counter checks; pool",
        "gathering holds node selectors (matching shared slices to the node), slice",
        "conversion and counter validation (every device's consumption against its",
        "pool's counter sets).",
        "",
        row(label, "layout", *parts),
        row(*["---"] * (2 + len(parts))),
    ]
    for count, layouts in profiled.items():
        for name, profiles in layouts.items():
            if not profiles:
                continue
            shares = [
                spread([float(p["parts_cum_percent"][part]) for p in profiles], "{:.1f}%")
                if all(part in p["parts_cum_percent"] for p in profiles)
                else "not taken"
                for part in parts
            ]
            lines.append(row(count, name, *shares))
    return lines


BUSY_ANCHOR: Final = "per-node pools (same devices)"
"""The layout every busy layout is divided by, round by round."""
NODE_LAYOUT: Final = "node pools"
"""The `node` pool layout as the controller publishes it by default."""
BUSY_GOALS: Final = {"vs_anchor": 1.3, "growth": 1.5, "pods_per_second": 20.0}
"""Our layout over the anchor at every occupancy; the cost at the highest
occupancy over the cost at 0%; single-core pods/s at 10 racks, highest occupancy."""


Occupancy = dict[str, dict[str, dict[str, list[dict[str, Any]]]]]
"""Runs by racks, held percent and layout."""


def _median_ratio(runs_: list[dict[str, Any]], base: list[dict[str, Any]], key: str) -> float:
    return median(runs_, key) / median(base, key)


def occupancy_part(occupancy: Occupancy) -> list[str]:
    """Scheduler CPU per pod on a busy fleet, our layouts beside the anchor."""
    key = "scheduler_cpu_ms_per_pod"
    lines = [
        "",
        "### Busy fleets",
        "",
        "Unpinned single-core pods (one claim each) on a fleet whose cores are already",
        "held: 0%, 50% or 90% of them, a mix of whole servers (35% of the held cores),",
        "whole chips (40%) and 1, 2 and 4-core partitions (25%) filling chips to the",
        "fleet's occupancy, so the free cores are scattered as after a day of jobs. The",
        "held devices are written as allocated claims (`status.allocation` as the",
        "scheduler writes it: request, driver, pool, device, and the node selector),",
        "not scheduled one by one: the scheduler's allocator takes allocated devices,",
        "and the counters they consume, from its claim informer. Each run checks it: a",
        "claim that only a held server fits must stay unschedulable (`refused` below).",
        "The same devices are held in every layout; the anchor, per-node pools of the",
        "node layout's devices without counters, holds every device overlapping a",
        "held one, so the same cores are taken. The node layout publishes rack devices",
        "as the controller does (only racks nothing is held of); server pools publish",
        "none. `vs anchor` divides each round's scheduler CPU per pod by the anchor's in",
        "the same round; `vs 0%` divides the layout's median by its own at 0%. Rack",
        "pools run on one rack unless asked for (`--busy-layouts`): every node of a",
        "larger fleet gathers its rack's whole pool for every pod. The `(ordered)` rows",
        "publish the same layout as the controller's `--publishing order` does over the",
        'held devices (docs/device-model.md, "Publishing order"): the devices they block',
        "last in each slice, the same devices as the plain row. The `(available)` rows",
        "publish the layout with every device the held ones block withdrawn",
        "(`blocking.blocked_devices`): what availability-aware publishing would show the",
        "scheduler once settled; the controller does not offer it (docs/device-model.md).",
        "",
        row(
            "racks",
            "held",
            "layout",
            "slices",
            "pods",
            "scheduler CPU ms/pod",
            "vs anchor",
            "vs 0%",
            "pods/s",
            "refused",
        ),
        row(*["---"] * 10),
    ]
    verdicts: list[str] = []
    for count, percents in occupancy.items():
        fleet = f"{count} rack" if count == "1" else f"{count} racks"
        empty = percents.get("0", {})
        top = max(percents, key=int)
        for percent, layouts in percents.items():
            anchor = layouts.get(BUSY_ANCHOR)
            for name, runs_ in layouts.items():
                versus = (
                    pairwise_ratios(runs_, anchor, key) if anchor and name != BUSY_ANCHOR else ""
                )
                growth = f"{_median_ratio(runs_, empty[name], key):.2f}" if name in empty else ""
                refused = sum(1 for r in runs_ if r.get("held_server_refused"))
                lines.append(
                    row(
                        count,
                        f"{percent}%",
                        name,
                        runs_[0]["slices"],
                        runs_[0]["pods"],
                        spread(values(runs_, key)),
                        versus,
                        growth,
                        spread(values(runs_, "pods_per_second"), "{:,.1f}"),
                        f"{refused}/{len(runs_)}" if percent != "0" else "",
                    )
                )
                if name == BUSY_ANCHOR:
                    continue
                if anchor and _median_ratio(runs_, anchor, key) > BUSY_GOALS["vs_anchor"]:
                    verdicts.append(f"{name} at {fleet}, {percent}% held: over the anchor")
                pace = median(runs_, "pods_per_second")
                if count == "10" and percent == top and pace < BUSY_GOALS["pods_per_second"]:
                    verdicts.append(f"{name} at 10 racks, {top}% held: {pace:.1f} pods/s")
                grew = name in empty and _median_ratio(runs_, empty[name], key)
                if percent == top and grew and grew > BUSY_GOALS["growth"]:
                    verdicts.append(f"{name} at {fleet}: {top}% over 0%")
    lines += [
        "",
        f"Goals: at every occupancy our layout at most {BUSY_GOALS['vs_anchor']}x the anchor;"
        f" at the highest occupancy at most {BUSY_GOALS['growth']}x its own cost at 0%;"
        f" at 10 racks and the highest occupancy at least {BUSY_GOALS['pods_per_second']:g}"
        " single-core pods/s.",
        "Missed: " + "; ".join(verdicts) + "." if verdicts else "Every layout meets them.",
    ]
    return lines


def empty_fleets(r: dict[str, Any]) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """The busy-fleet runs with nothing held, by racks and layout: what each
    layout costs the scheduler on an empty fleet of each size."""
    occupancy: Occupancy = r.get("occupancy") or {}
    return {count: percents["0"] for count, percents in occupancy.items() if "0" in percents}


def occupancy_profile(occupancy: Occupancy) -> list[str]:
    """Where the scheduler's CPU went on the busy fleets, by fleet and occupancy."""
    flat = {
        f"{count} @ {percent}%": layouts
        for count, percents in occupancy.items()
        for percent, layouts in percents.items()
    }
    return profile_part(flat, "racks @ held")


def binpack_part(runs: list[dict[str, Any]], goal: float) -> list[str]:
    lines = [
        "",
        "The same random mixes asked for as `aws.amazon.com/neuroncore: N` (extended",
        "resources, served through DRA as N single cores of one node), placed by",
        "upstream's default profile and by the chart's bin-packing profile",
        "(`NodeResourcesFit`, `MostAllocated` on the extended resources), one after",
        "the other for each seed:",
        "",
        row("seed", "profile", "pods", "cores allocated", "share", "scheduler CPU ms/pod"),
        row(*["---"] * 6),
        *(
            row(
                r["seed"],
                r["profile"],
                r["pods"],
                f"{r['allocated_cores']}/{r['cores_requested']}",
                r["ratio"],
                r["scheduler_cpu_ms_per_pod"],
            )
            for r in runs
        ),
        "",
    ]
    for profile in dict.fromkeys(r["profile"] for r in runs):
        mine = [r for r in runs if r["profile"] == profile]
        below = sum(1 for r in mine if r["ratio"] < goal)
        worst = (
            f"; worst share **{min(r['ratio'] for r in mine)}**"
            if len(mine) >= WORST_SHARE_MIN_RUNS
            else f" ({len(mine)} runs: too few for a worst share)"
        )
        lines.append(f"- {profile}: {below} of {len(mine)} runs below {goal}{worst}.")
    return lines


def measured_steps(r: dict[str, Any]) -> list[str]:
    """The steps whose figures the results hold."""
    layouts = r.get("layouts") or {}
    found = {
        "layouts": bool(set(layouts) - {"calibration"}),
        "calibration": "calibration" in layouts,
    }
    return [step for step in STEPS if found.get(step, bool(r.get(step)))]


def unmeasured_part(r: dict[str, Any]) -> list[str]:
    """The steps the results hold no figures of, and how to measure one."""
    missing = [f"`{step}`" for step in STEPS if step not in measured_steps(r)]
    if not missing:
        return []
    return [
        f"Steps not measured: {', '.join(missing)}; `make bench-scheduler "
        "BENCH_ARGS='--steps STEP'` measures one and keeps the other steps' figures.",
    ]


def render(payload: dict[str, Any]) -> str:
    """The section's body for the results of `benchmarks.scheduler`."""
    r = payload["results"]
    layouts = r.get("layouts") or {}
    lines = unmeasured_part(r) + (layouts_part(r, layouts) if layouts else [])
    if r.get("orders"):
        lines += orders_part(r["orders"], layouts) + step_note(r, "orders")
    if r.get("packing"):
        lines += packing_part(r["packing"], r["packing_goal"]) + step_note(r, "packing")
    if r.get("binpack"):
        lines += binpack_part(r["binpack"], r["packing_goal"]) + step_note(r, "binpack")
    if r.get("racks"):
        lines += racks_part(r["racks"]) + step_note(r, "racks") + profile_part(r["racks"])
    if r.get("occupancy"):
        occupancy = r["occupancy"]
        lines += occupancy_part(occupancy) + occupancy_notes(r, occupancy)
        lines += occupancy_profile(occupancy)
    return "\n".join(lines).rstrip("\n") + "\n"
