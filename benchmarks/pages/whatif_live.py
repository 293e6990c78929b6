"""docs/bench-whatif.md's block of live replays, from
benchmarks/results/whatif-live.json: each case's figures beside the offline
anchor's for the same trace, a table per clock, and the measurements that say
where a replay's wall time went; and docs/queues.md's block of what putting
jobs through Kueue costs, from the same cases. Every case carries its own date
and conditions (release, commit, load); a case without them is refused."""

from collections.abc import Mapping
from typing import Any, Final

from benchmarks.conditions import is_noisy
from benchmarks.pages.common import NotRecordedError, recorded, replace_block, table
from whatif.jobdiff import CAUSES

TOP_PROCESSES = 5
SOURCE: Final = "benchmarks/results/whatif-live.json"


def _share(value: float | None) -> str:
    return "" if value is None else f"{value:.1%}"


def _delays(delays: Mapping[str, Any]) -> str:
    return f"{delays['p50']:,.0f} / {delays['p90']:,.0f} / {delays['max']:,.0f}"


def _conditions(name: str, case: Mapping[str, Any]) -> Mapping[str, Any]:
    """The case's own conditions, refused where it recorded none or no date."""
    conditions = recorded(case.get("conditions"), f"{SOURCE}, case `{name}`")
    if not case.get("date"):
        raise NotRecordedError(f"{SOURCE}, case `{name}`: the case recorded no date")
    return conditions


def _queueing(case: Mapping[str, Any]) -> str:
    """The live replay's queueing: Kueue's, or backfill (the bare scheduler
    holds no job back behind another)."""
    live = next(run for run in case["runs"] if run["policy"] == "kube-scheduler")
    return str(live["queueing"])


def _by_policy(case: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """Each replay by placement rule; of the anchors, the one queueing as the
    live replay did."""
    queueing = _queueing(case)
    return {run["policy"]: run for run in case["runs"] if run["queueing"] == queueing}


def _clock(case: Mapping[str, Any]) -> str:
    """The case's clock: the settle clock, or the wall clock at its speed-up."""
    if case["clock"] == "settle":
        return "the settle clock"
    return f"the wall clock at {case['speedup']:,.1f} simulated seconds a wall second"


def _diff(case: Mapping[str, Any]) -> str:
    """Jobs that started alike live and under best fit queueing alike, and
    the largest cause of the rest."""
    d = next(d for d in case["diff"] if d["anchor"] == f"best-fit {_queueing(case)}")
    top = next(iter(d["causes"].items()), None)
    cause = f"; most: {top[1]:,} {CAUSES[top[0]]}" if top else ""
    return f"{d['alike']:,} of {d['jobs']:,} alike{cause}"


def _load(conditions: Mapping[str, Any]) -> str:
    """The case's load before, at most during (where sampled) and after,
    marked noisy where any reading exceeded the CPUs."""
    during = (conditions["load_during_1min"] or {}).get("max")
    peak = f" \u2192 up to {during:g}" if during is not None else ""
    unsampled = " (not sampled during)" if during is None else ""
    text = (
        f"{conditions['load_1min_before']:g}{peak} \u2192 "
        f"{conditions['load_1min_after']:g}{unsampled}"
    )
    return f"**noisy**: {text}" if is_noisy(conditions) else text


def _row(name: str, case: Mapping[str, Any]) -> list[object]:
    runs = _by_policy(case)
    live, first, best = runs["kube-scheduler"], runs["first-fit"], runs["best-fit"]
    gap = 100 * (live["allocation_rate_while_arriving"] - best["allocation_rate_while_arriving"])
    return [
        f"`{name}`",
        f"{live['jobs_run']:,} / {live['jobs_never_run']:,}",
        f"{case['wall_seconds']:,.0f}",
        f"{_share(live['allocation_rate_while_arriving'])} / "
        f"{_share(first['allocation_rate_while_arriving'])} / "
        f"{_share(best['allocation_rate_while_arriving'])}",
        f"{gap:+.1f}",
        _delays(live["queueing_delay_s"]),
        _delays(best["queueing_delay_s"]),
        _diff(case),
        f"{case['bind_latency_wall_s']['p50']:,.1f}",
        f"{live['evictions']}",
        _load(_conditions(name, case)),
    ]


def _runs(cases: Mapping[str, Any]) -> str:
    """Each case's date and the commit it ran from."""
    return ", ".join(
        f"`{name}` ({case['date']}, commit {_conditions(name, case)['git_commit'][:10]})"
        for name, case in cases.items()
    )


HEADER: Final = [
    "case",
    "jobs run / never ran",
    "wall s",
    "allocation while jobs arrive: live / first fit / best fit",
    "live \u2212 best fit (points)",
    "queueing p50 / p90 / max, live (s)",
    "queueing p50 / p90 / max, best fit (s)",
    "jobs started alike, live and best fit",
    "binding p50, wall s",
    "evictions",
    "load average",
]


def _by_clock(cases: Mapping[str, Any]) -> list[str]:
    """A table per clock (and speed-up): figures of different clocks are not
    one run's, so no table mixes them. Each says its cases' dates and commits;
    a case that recorded neither is refused before any table is written."""
    clocks: dict[str, dict[str, Any]] = {}
    for name, case in cases.items():
        _conditions(name, case)
        clocks.setdefault(_clock(case), {})[name] = case
    lines: list[str] = []
    for clock, mine in clocks.items():
        lines += [
            "",
            f"On {clock}: {_runs(mine)}.",
            "",
            table(HEADER, [_row(name, case) for name, case in mine.items()]),
        ]
    return lines


def _wait(shape: Mapping[str, Any] | None) -> str:
    if shape is None:
        return ""
    mean, most = shape["wait_mean_s"], shape["wait_max_s"]
    waited = "" if mean is None else f"{mean:,.0f} / {most:,.0f}"
    never = f" ({shape['never_ran']} never ran)" if shape["never_ran"] else ""
    return f"{waited}{never}"


PARTING = [
    "case",
    "policy",
    "allocation while jobs arrive",
    "allocation while jobs wait",
    "queueing p50 / p90 / max (s)",
    "makespan (s)",
    "whole-rack jobs: wait mean / max (s)",
    "four-server gangs: wait mean / max (s)",
]
"""The columns `_parting` fills."""


def _parting(name: str, case: Mapping[str, Any]) -> list[object]:
    """One case of the policy trace: its live figures and how long its
    largest jobs waited."""
    live = _by_policy(case)["kube-scheduler"]
    shapes = case["by_shape"]["kube-scheduler, gangs " + ("on" if live["gangs"] else "off")]
    return [
        f"`{name}`",
        case["what"],
        _share(live["allocation_rate_while_arriving"]),
        _share(live["allocation_rate_while_waiting"]),
        _delays(live["queueing_delay_s"]),
        f"{live['makespan_s']:,.0f}",
        _wait(shapes.get("rack")),
        _wait(shapes.get("server")),
    ]


def _has_large_jobs(case: Mapping[str, Any]) -> bool:
    """Whether the case kept waits by shape for the shapes the policy table
    shows (whole racks, four-server gangs): a trace without them has nothing
    to say there."""
    return any(set(shapes) & {"rack", "server"} for shapes in case.get("by_shape", {}).values())


def _policies(cases: Mapping[str, Any]) -> list[str]:
    """The cases that kept each shape's waits (one trace, one rack, each
    policy), side by side; empty if none did."""
    rows = [_parting(name, case) for name, case in cases.items() if _has_large_jobs(case)]
    if not rows:
        return []
    return [
        "",
        "Where the policies part: the same trace on one rack (more work than the rack "
        "holds, so a queue always waits), live, each under one policy; waits in "
        "simulated seconds, by the shape of the job:",
        "",
        table(PARTING, rows),
    ]


def _lost(run: Mapping[str, Any]) -> str:
    lost = run["spread_lost_job_s"]
    return f"{lost['total']:,.0f} / {lost['p50']:,.0f} / {lost['p90']:,.0f}"


def _spread(cases: Mapping[str, Any]) -> list[str]:
    """The cases whose jobs carry work: the job-seconds each lost to spread,
    live and under each anchor queueing alike; empty if no case has them."""
    rows = [
        [f"`{name}`", policy, f"{run['spread_lost_job_s']['jobs']:,}", _lost(run)]
        for name, case in cases.items()
        if "spread_lost_job_s" in _by_policy(case)["kube-scheduler"]
        for policy, run in _by_policy(case).items()
        if "spread_lost_job_s" in run
    ]
    if not rows:
        return []
    return [
        "",
        "Job time by placement: jobs with work run as long as their work takes on the "
        "chips they were given, live as in the anchors; the job-seconds each replay lost "
        "to spread (signed: a looser placement is sometimes the faster), over its jobs "
        "with work that ran:",
        "",
        table(["case", "placement", "jobs", "lost to spread: total / p50 / p90 (s)"], rows),
    ]


def _cost(name: str, case: Mapping[str, Any]) -> str:
    cpu = case["cpu_seconds_by_process"]
    busiest = sorted(cpu.items(), key=lambda kv: -kv[1])[:TOP_PROCESSES]
    top = ", ".join(f"{p} {s:,.0f}" for p, s in busiest)
    total = sum(cpu.values())
    wall_cpu = case["wall_seconds"] * case["cpus"]
    attempts = case["scheduler_attempts"]
    spent = sum(a.get("seconds", 0.0) for a in attempts.values())
    parts = []
    for result, a in sorted(attempts.items()):
        share = f", {a.get('seconds', 0.0) / spent:.0%} of its attempt time" if spent else ""
        parts.append(f"{result} {a.get('attempts', 0):,.0f}{share}")
    return (
        f"- `{name}` ({case['date']}): {case['what']}. The cluster's processes used "
        f"{total:,.0f} CPU seconds of the {wall_cpu:,.0f} the {case['cpus']} CPUs had in "
        f"its {case['wall_seconds']:,.0f} s (most: {top}). The scheduler's attempts: "
        f"{'; '.join(parts) or 'not read'}."
    )


def _repeats(name: str, case: Mapping[str, Any]) -> str:
    """The same trace replayed again on the same cluster: allocation and the
    share of jobs starting when they did in the first replay."""
    runs = case["repeats"]
    allocation = " / ".join(_share(r["allocation_rate_while_arriving"]) for r in runs)
    same = " / ".join(f"{r['same_start_share']:.0%}" for r in runs[1:])
    spread = 100 * (
        max(r["allocation_rate_while_arriving"] for r in runs)
        - min(r["allocation_rate_while_arriving"] for r in runs)
    )
    hog = next((r for r in runs if r["hog"]), None)
    beside = (
        f" The last ran beside a busy loop on every CPU (load {hog['load_1min_after']:g} "
        f"after it) and took {hog['wall_seconds']:,.0f} s of wall time against "
        f"{runs[0]['wall_seconds']:,.0f} s."
        if hog
        else ""
    )
    return (
        f"- `{name}`: the same trace {len(runs)} times on one cluster. Allocation while jobs "
        f"arrive, live: {allocation} ({spread:.1f} points apart). Jobs that started at the "
        f"same simulated second as in the first replay: {same}.{beside}"
    )


def render(page: str, payload: Mapping[str, Any]) -> str:
    cases: Mapping[str, Any] = payload["results"]["cases"]
    if not cases:
        body = "Not measured yet: `make bench-whatif-live` measures it."
        return replace_block(page, "live", body)
    body = "\n".join(
        [
            f"From {SOURCE}, written by `make bench-whatif-live` "
            "case by case (`BENCH_ARGS=--cases NAME` runs some and keeps the others' "
            f"results; the last run was `{payload['command']}`) on a machine of "
            f"{payload['machine']['cpus']} CPUs, each case on a cluster of its own. "
            "Queueing and allocation are in simulated time; binding is wall seconds from "
            "a job's creation to its last pod bound. On the settle clock simulated time "
            "stands still while the cluster works, so its figures do not depend on this "
            "machine; on the wall clock (a speed-up) the scheduler's latency shows as "
            "queueing, so each clock has a table of its own. A case whose 1-minute load "
            "exceeded the CPU count at any reading is marked noisy: its wall times, and on "
            "the wall clock its figures, include waiting for a CPU.",
            *_by_clock(cases),
            "",
            "Where each replay's time went (CPU seconds by process, and the scheduler's "
            "attempts by result, from its /metrics):",
            "",
            *(_cost(name, case) for name, case in cases.items()),
            *(
                ["", "Replayed again (the settle clock's reproducibility):", ""]
                if any("repeats" in case for case in cases.values())
                else []
            ),
            *(_repeats(name, case) for name, case in cases.items() if "repeats" in case),
            *_policies(cases),
            *_spread(cases),
        ]
    )
    return replace_block(page, "live", body)


KUEUE_CASES = ("policy-extended", "kueue-strict", "kueue-best-effort")
"""The same trace and pods, straight to the scheduler and through Kueue."""


def queues(page: str, payload: Mapping[str, Any]) -> str:
    """docs/queues.md's block: the policy trace with Neuron-style requests,
    bare and through each of Kueue's queueing strategies, live, with the
    anchor that queues alike beside each."""
    cases: Mapping[str, Any] = payload["results"]["cases"]
    found = {
        n: cases[n]
        for n in KUEUE_CASES
        if n in cases and "by_shape" in cases[n] and cases[n]["clock"] == "settle"
    }
    if not found:
        body = (
            "Not measured yet: `make bench-whatif-live BENCH_ARGS='--cases "
            f"{','.join(KUEUE_CASES)}'` measures it."
        )
        return replace_block(page, "kueue", body)
    header = [*PARTING, "jobs started alike with the anchor queueing alike"]
    rows = [[*_parting(n, case), _diff(case)] for n, case in found.items()]
    body = "\n".join(
        [
            f"From {SOURCE} (`make bench-whatif-live`, cases {_runs(found)}): one rack, the "
            "same trace of partitions, chips, four-server gangs and whole racks, more work "
            "than the rack holds; pods ask by extended resource name; the settle clock, so "
            "waits are simulated seconds. The anchor is best fit under the same queueing: "
            "backfill for the bare scheduler, Kueue's quota rule for the others.",
            "",
            table(header, rows),
        ]
    )
    return replace_block(page, "kueue", body)
