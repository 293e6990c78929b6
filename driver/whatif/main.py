"""`trainium-dra whatif`: replay a job trace on simulated racks.

    trainium-dra whatif offline [--racks 10] [--jobs 2000] [--mix ...] [--out DIR]
    trainium-dra whatif stats ALIBABA_CSV

`offline` replays the trace with the offline anchor (no API, idealized
placement) under first fit and best fit, and writes the trace it used
(trace.csv), every figure (result.json), plots (PNG) and a report
(report.md) into DIR.
`stats` prints what the generator would take from an Alibaba GPU trace."""

import argparse
import importlib.util
import json
import sys
from pathlib import Path

from driver.whatif.faults import FaultRates, RandomFailures
from driver.whatif.fleet import POLICIES
from driver.whatif.jobs import Job, JobError
from driver.whatif.metrics import summarize
from driver.whatif.offline import replay
from driver.whatif.plots import write_plots
from driver.whatif.report import markdown
from driver.whatif.runtime import parse_work, timed_all
from driver.whatif.trace import (
    TraceSpec,
    generate,
    read_alibaba_v2023,
    read_trace,
    trace_stats,
    write_trace,
)
from simdevice.topology import GENERATIONS, rack_spec


def parse_mix(text: str) -> dict[str, float]:
    """`cores-1=0.6,chips-1=0.3,serverx4=0.1` -> {label: weight}."""
    mix = {}
    for part in filter(None, text.split(",")):
        label, _, weight = part.partition("=")
        try:
            mix[label.strip()] = float(weight)
        except ValueError as err:
            raise JobError(f"--mix {part!r}: write KIND=WEIGHT, e.g. serverx4=0.1") from err
    return mix


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="trainium-dra whatif", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)
    off = sub.add_parser("offline", help="replay a trace with the offline anchor")
    off.add_argument("--generation", default="trn3-gen2", choices=GENERATIONS)
    off.add_argument("--racks", type=int, default=10)
    source = off.add_mutually_exclusive_group()
    source.add_argument("--trace", type=Path, help="a trace CSV this command wrote")
    source.add_argument(
        "--alibaba", type=Path, help="an openb_pod_list CSV (cluster-trace-gpu-v2023)"
    )
    off.add_argument("--jobs", type=int, default=2000, help="jobs to generate")
    off.add_argument("--seed", type=int, default=1)
    off.add_argument("--load", type=float, default=0.9, help="offered load of generated jobs")
    off.add_argument(
        "--mix", default="", help="job kinds and weights, e.g. cores-1=0.6,serverx4=0.1"
    )
    off.add_argument(
        "--work",
        default="",
        help="what generated jobs compute (a workload spec as JSON); durations then come "
        "from the simulated cores of the generation replayed",
    )
    off.add_argument("--no-gangs", action="store_true", help="place a job's pods one by one")
    off.add_argument("--chip-mtbf-hours", type=float, help="mean hours between one chip's failures")
    off.add_argument("--core-mtbf-hours", type=float, help="mean hours between one core's failures")
    off.add_argument("--repair-hours", type=float, default=4.0, help="time a failed device is out")
    off.add_argument("--out", type=Path, default=Path("whatif-out"))
    stats = sub.add_parser("stats", help="the generator's inputs from an Alibaba GPU trace")
    stats.add_argument("alibaba", type=Path)
    stats.add_argument("--generation", default="trn3-gen2", choices=GENERATIONS)
    return p


def jobs_of(args: argparse.Namespace) -> list[Job]:
    rack = rack_spec(args.generation)
    if args.trace:
        return read_trace(args.trace)
    if args.alibaba:
        jobs, skipped = read_alibaba_v2023(args.alibaba, rack)
        print(f"read {len(jobs)} jobs from {args.alibaba}; skipped {dict(skipped)}", flush=True)
        return jobs
    work = parse_work(args.work) if args.work else None
    spec = TraceSpec(args.jobs, args.load, mix=parse_mix(args.mix), work=work)
    return generate(spec, rack, args.racks, args.seed)


def offline(args: argparse.Namespace) -> int:
    rack = rack_spec(args.generation)
    jobs = timed_all(jobs_of(args), rack)
    args.out.mkdir(parents=True, exist_ok=True)
    write_trace(args.out / "trace.csv", jobs)
    rates = FaultRates(args.chip_mtbf_hours, args.core_mtbf_hours, args.repair_hours)
    runs = []
    for policy in POLICIES:
        print(f"{policy}: replaying {len(jobs)} jobs on {args.racks} racks", flush=True)
        failures = RandomFailures(rates, rack, args.racks, args.seed)
        runs.append(
            replay(
                jobs, rack, args.racks, policy=policy, gangs=not args.no_gangs, failures=failures
            )
        )
    result = {
        "trace": str(args.out / "trace.csv"),
        "seed": args.seed,
        "offline": [summarize(run) for run in runs],
    }
    (args.out / "result.json").write_text(json.dumps(result, indent=2) + "\n")
    plots = []
    if importlib.util.find_spec("matplotlib") is None:
        print("no plots: matplotlib is missing (pip install 'trainium-dra[whatif]')", flush=True)
    else:
        plots = [p.name for p in write_plots(args.out, runs)]
    (args.out / "report.md").write_text(markdown(result, plots))
    print(f"wrote {args.out / 'report.md'}", flush=True)
    return 0


def stats(args: argparse.Namespace) -> int:
    jobs, skipped = read_alibaba_v2023(args.alibaba, rack_spec(args.generation))
    found = trace_stats(jobs)
    print(json.dumps({"skipped": dict(skipped), **found.__dict__}, indent=2, default=list))
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return offline(args) if args.command == "offline" else stats(args)
    except (ValueError, OSError) as err:  # JobError, TraceError, TopologyError and bad rates
        print(f"trainium-dra whatif: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
