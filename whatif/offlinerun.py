"""`trainium-dra whatif offline`: the trace the flags name, replayed with the
offline anchor, and the files written; the live replay takes the same pieces
for its trace, the anchor beside it and its files."""

import argparse
import importlib.util
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from driver.devicemodel.layout import PARTITION_SIZES
from localsim.commands.flags import parse_sizes
from simdevice.topology import RackSpec, rack_spec
from whatif.faults import Failures, FaultRates, RandomFailures
from whatif.figures import summarize
from whatif.fleet import POLICIES, SPREAD
from whatif.jobs import Job, JobError, check_fits, offered
from whatif.jobtimes import parse_work, timed_all
from whatif.offline import KUEUE_QUEUEING, QUEUEING, replay
from whatif.plots import label, write_plots, write_timelines
from whatif.replay import Replay
from whatif.report import markdown
from whatif.trace import TraceSpec, generate, read_alibaba_v2023, read_trace, write_trace

V = TypeVar("V")


def parse_kinds(text: str, flag: str, value: Callable[[str], V], example: str) -> dict[str, V]:
    """`flag`'s `KIND=VALUE,...` (e.g. `--mix cores-1=0.6,serverx4=0.1`) ->
    {kind label: value}, naming the part that `value` cannot read."""
    found = {}
    for part in filter(None, text.split(",")):
        label, _, raw = part.partition("=")
        try:
            found[label.strip()] = value(raw)
        except ValueError as err:
            raise JobError(f"{flag} {part!r}: write {example}") from err
    return found


def jobs_of(
    args: argparse.Namespace, rack: RackSpec, racks: int, sizes: tuple[int, ...]
) -> list[Job]:
    """The trace the flags name, each job's duration for `rack`'s generation,
    its core partitions among `sizes`."""
    if args.trace:
        jobs = read_trace(args.trace)
    elif args.alibaba:
        jobs, skipped = read_alibaba_v2023(args.alibaba, rack)
        print(f"read {len(jobs)} jobs from {args.alibaba}; skipped {dict(skipped)}", flush=True)
    else:
        work = parse_work(args.work) if args.work else None
        cap = args.max_duration_hours * 3600 if args.max_duration_hours else None
        spec = TraceSpec(
            args.jobs,
            args.load,
            mix=parse_kinds(args.mix, "--mix", float, "KIND=WEIGHT, e.g. serverx4=0.1"),
            work=work,
            max_duration=cap,
            priorities=parse_kinds(args.priority, "--priority", int, "KIND=INTEGER, e.g. rack=10"),
        )
        jobs = generate(spec, rack, racks, args.seed)
    for job in jobs:
        check_fits(job, rack, racks)
    replayed = [offered(job, sizes) for job in timed_all(jobs, rack)]
    grown = sum(a.shape != b.shape for a, b in zip(jobs, replayed, strict=True))
    if grown:
        print(
            f"{grown} jobs take a larger partition or a whole chip: the site offers core "
            f"partitions of {','.join(map(str, sizes))} only",
            flush=True,
        )
    return replayed


def anchor_runs(
    jobs: list[Job],
    rack: RackSpec,
    racks: int,
    *,
    gangs: bool,
    failures: Callable[[], Failures],
    queueings: Sequence[str] = QUEUEING,
    policies: Sequence[str] = POLICIES,
) -> list[Replay]:
    """The trace under each placement rule and queueing policy; `failures`
    gives each its own failures, drawn alike."""
    runs = []
    for policy in policies:
        for queueing in queueings:
            print(f"{policy} {queueing}: replaying {len(jobs)} jobs on {racks} racks", flush=True)
            runs.append(
                replay(
                    jobs,
                    rack,
                    racks,
                    policy=policy,
                    gangs=gangs,
                    queueing=queueing,
                    failures=failures(),
                )
            )
    return runs


def job_records(runs: list[Replay]) -> dict[str, list[dict[str, Any]]]:
    """Every job's record under each replay, by the replay's label."""
    return {label(run): [r.as_json() for r in run.records] for run in runs}


def fault_rates(args: argparse.Namespace) -> FaultRates:
    return FaultRates(args.chip_mtbf_hours, args.core_mtbf_hours, args.repair_hours)


def write_outputs(out: Path, result: dict[str, Any], runs: list[Replay], title: str) -> None:
    (out / "result.json").write_text(json.dumps(result, indent=2) + "\n")
    plots = []
    if importlib.util.find_spec("matplotlib") is None:
        print("no plots: matplotlib is missing (pip install 'trainium-dra[whatif]')", flush=True)
    else:
        plots = [p.name for p in [*write_plots(out, runs), *write_timelines(out, runs)]]
    (out / "report.md").write_text(markdown(result, title, plots))
    print(f"wrote {out / 'report.md'}", flush=True)


def offline(args: argparse.Namespace) -> int:
    rack = rack_spec(args.generation, projected=True)
    jobs = jobs_of(args, rack, args.racks, parse_sizes(args.partition_sizes) or PARTITION_SIZES)
    args.out.mkdir(parents=True, exist_ok=True)
    write_trace(args.out / "trace.csv", jobs)
    rates = fault_rates(args)
    runs = anchor_runs(
        jobs,
        rack,
        args.racks,
        gangs=not args.no_gangs,
        failures=lambda: RandomFailures(rates, rack, args.racks, args.seed),
        queueings=QUEUEING + KUEUE_QUEUEING if args.with_kueue else QUEUEING,
        policies=(*POLICIES, SPREAD) if args.with_spread else POLICIES,
    )
    result = {
        "trace": str(args.out / "trace.csv"),
        "seed": args.seed,
        "runs": [summarize(run) for run in runs],
        "jobs": job_records(runs),
    }
    write_outputs(args.out, result, runs, "the offline anchor (no API, idealized placement)")
    return 0
