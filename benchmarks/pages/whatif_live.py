"""docs/bench-whatif.md's block of live replays, from
benchmarks/results/whatif-live.json: each case's figures beside the offline
anchor's for the same trace, and the measurements that say where a replay's
wall time went; and docs/queues.md's block of what putting jobs through Kueue
costs, from the same cases."""

import re
from collections.abc import Mapping
from typing import Any

from benchmarks.conditions import is_noisy
from benchmarks.pages.common import replace_block, table
from whatif.jobdiff import CAUSES

TOP_PROCESSES = 5


def _share(value: float | None) -> str:
    return "" if value is None else f"{value:.1%}"


def _most(delays: Mapping[str, Any]) -> str:
    return "max not recorded" if delays.get("max") is None else f"{delays['max']:,.0f}"


def _queueing(case: Mapping[str, Any]) -> str:
    """The live replay's queueing: Kueue's, or backfill (the bare scheduler
    holds no job back behind another)."""
    live = next(run for run in case["runs"] if run["policy"] == "kube-scheduler")
    return str(live.get("queueing", "backfill"))


def _by_policy(case: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """Each replay by placement rule; of the anchors, the one queueing as the
    live replay did."""
    queueing = _queueing(case)
    return {
        run["policy"]: run for run in case["runs"] if run.get("queueing", "backfill") == queueing
    }


def _clock(case: Mapping[str, Any]) -> str:
    """The case's clock: the settle clock, or the wall clock's speed-up."""
    if case.get("clock", "wall") == "settle":
        return "settle clock"
    return f"{case['speedup']:,.1f}x"


def _diff(case: Mapping[str, Any]) -> str:
    """Jobs that started alike live and under best fit with backfill, and
    the largest cause of the rest."""
    for d in case.get("diff", ()):
        if d["anchor"] == f"best-fit {_queueing(case)}":
            top = next(iter(d["causes"].items()), None)
            cause = f"; most: {top[1]:,} {CAUSES[top[0]]}" if top else ""
            return f"{d['alike']:,} of {d['jobs']:,} alike{cause}"
    return "not recorded"


def _load(case: Mapping[str, Any], run: Mapping[str, Any] | None) -> str:
    """The case's load before, at most during (where sampled) and after, marked
    noisy where any reading exceeded the CPUs. A case recorded before the
    shared conditions keeps the replay's own before and after; if the last run
    measured it, that run's readings during it (which cover all its cases)
    stand for its own."""
    load = case["load_1min"]
    conditions = case.get("conditions") or {
        "cpus": case["cpus"],
        "load_1min_before": load["before"],
        "load_1min_after": load["after"],
        **({"load_during_1min": run["load_during_1min"]} if run else {}),
    }
    during = (conditions.get("load_during_1min") or {}).get("max")
    peak = f" \u2192 up to {during:g}" if during is not None else ""
    unsampled = " (not sampled during)" if during is None else ""
    text = (
        f"{conditions['load_1min_before']:g}{peak} \u2192 "
        f"{conditions['load_1min_after']:g}{unsampled}"
    )
    return f"**noisy**: {text}" if is_noisy(conditions) else text


def _last_run(payload: Mapping[str, Any]) -> tuple[set[str], Mapping[str, Any] | None]:
    """The cases the last run measured, and its conditions: those its `--cases`
    names that are dated on its day (a run stopped midway names cases it never
    reached, which keep an older date)."""
    found = re.search(r"--cases[= ]'?([\w,-]+)", payload["command"])
    named = set(found.group(1).split(",")) if found else set()
    day = payload["machine"]["date"][:10]
    cases = payload["results"]["cases"]
    measured = {n for n in named if str(cases.get(n, {}).get("date", ""))[:10] == day}
    return measured, payload.get("conditions")


def _row(name: str, case: Mapping[str, Any], run: Mapping[str, Any] | None) -> list[object]:
    runs = _by_policy(case)
    live, first, best = runs["kube-scheduler"], runs["first-fit"], runs["best-fit"]
    q_live, q_best = live["queueing_delay_s"], best["queueing_delay_s"]
    gap = 100 * (live["allocation_rate_while_arriving"] - best["allocation_rate_while_arriving"])
    return [
        f"`{name}`",
        f"{live['jobs_run']:,} / {live['jobs_never_run']:,}",
        f"{case['wall_seconds']:,.0f} ({_clock(case)})",
        f"{_share(live['allocation_rate_while_arriving'])} / "
        f"{_share(first['allocation_rate_while_arriving'])} / "
        f"{_share(best['allocation_rate_while_arriving'])}",
        f"{gap:+.1f}",
        f"{q_live['p50']:,.0f} / {q_live['p90']:,.0f} / {_most(q_live)}",
        f"{q_best['p50']:,.0f} / {q_best['p90']:,.0f} / {_most(q_best)}",
        _diff(case),
        f"{case['bind_latency_wall_s']['p50']:,.1f}",
        f"{live['evictions']}",
        _load(case, run),
    ]


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
    q = live["queueing_delay_s"]
    shapes = case["by_shape"]["kube-scheduler, gangs " + ("on" if live["gangs"] else "off")]
    return [
        f"`{name}`",
        case["what"],
        _share(live["allocation_rate_while_arriving"]),
        _share(live["allocation_rate_while_waiting"]),
        f"{q['p50']:,.0f} / {q['p90']:,.0f} / {_most(q)}",
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


def _commits(cases: Mapping[str, Any]) -> str:
    """The commit each of `cases` ran from, where its own conditions recorded one."""
    known = {
        name: case["conditions"]["git_commit"][:10]
        for name, case in cases.items()
        if (case.get("conditions") or {}).get("git_commit")
    }
    if not known:
        return " No case recorded the commit it ran from: these runs predate that record."
    named = ", ".join(f"`{name}` at commit {commit}" for name, commit in sorted(known.items()))
    rest = " The others predate that record." if len(known) < len(cases) else ""
    return f" Commits: {named}.{rest}"


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
    when = case.get("date") or "date not recorded"
    return (
        f"- `{name}` ({when}): {case['what']}. The cluster's processes used "
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
    measured, conditions = _last_run(payload)
    header = [
        "case",
        "jobs run / never ran",
        "wall s (clock)",
        "allocation while jobs arrive: live / first fit / best fit",
        "live \u2212 best fit (points)",
        "queueing p50 / p90 / max, live (s)",
        "queueing p50 / p90 / max, best fit (s)",
        "jobs started alike, live and best fit",
        "binding p50, wall s",
        "evictions",
        "load average",
    ]
    body = "\n".join(
        [
            "From benchmarks/results/whatif-live.json, written by `make bench-whatif-live` "
            "case by case (`BENCH_ARGS=--cases NAME` runs some and keeps the others' "
            f"results; the last run was `{payload['command']}`) on a machine of "
            f"{payload['machine']['cpus']} CPUs, each case on a cluster of its own. "
            "Queueing and allocation are in simulated time; binding is wall seconds from "
            "a job's creation to its last pod bound. On the settle clock simulated time "
            "stands still while the cluster works, so its figures do not depend on this "
            "machine; on the wall clock (a speed-up) the scheduler's latency shows as "
            "queueing. A case whose 1-minute load exceeded the CPU count at any reading is "
            "marked noisy: its wall times, and on the wall clock its figures, include waiting "
            f"for a CPU.{_commits(cases)}",
            "",
            table(
                header,
                [
                    _row(name, case, conditions if name in measured else None)
                    for name, case in cases.items()
                ],
            ),
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
    found = [n for n in KUEUE_CASES if n in cases and "by_shape" in cases[n]]
    if not found:
        body = (
            "Not measured yet: `make bench-whatif-live BENCH_ARGS='--cases "
            f"{','.join(KUEUE_CASES)}'` measures it."
        )
        return replace_block(page, "kueue", body)
    header = [*PARTING, "jobs started alike with the anchor queueing alike"]
    rows = [[*_parting(n, cases[n]), _diff(cases[n])] for n in found]
    dates = sorted({cases[n]["date"] for n in found})
    when = dates[0] if len(dates) == 1 else f"{dates[0]} to {dates[-1]}"
    names = ", ".join(f"`{n}`" for n in found)
    body = "\n".join(
        [
            "From benchmarks/results/whatif-live.json (`make bench-whatif-live`, cases "
            f"{names}, run {when}): one rack, the same trace of "
            "partitions, chips, four-server gangs and whole racks, more work than the rack "
            "holds; pods ask by extended resource name; the settle clock, so waits are "
            "simulated seconds. The anchor is best fit under the same queueing: backfill for "
            "the bare scheduler, Kueue's quota rule for the others."
            f"{_commits({n: cases[n] for n in found})}",
            "",
            table(header, rows),
        ]
    )
    return replace_block(page, "kueue", body)
