"""`trainium-dra whatif`: replay a job trace on simulated racks.

    trainium-dra whatif offline [--racks 10] [--jobs 2000] [--mix ...] [--out DIR]
    trainium-dra whatif live [--clock settle | --clock wall --minutes 10] [--jobs ...] [--out DIR]
    trainium-dra whatif stats ALIBABA_CSV

`offline` replays the trace with the offline anchor (no API, idealized
placement) under first fit and best fit (with `--with-spread`, also spread),
each with backfill and with strict FIFO queueing (with `--with-kueue`, also
behind a Kueue-like quota). `live`
replays it through the real kube-scheduler on the running local cluster
(`trainium-dra up`; with `--kueue`, every job waits in a Kueue queue first),
on a clock that jumps from event to event once the cluster has settled (or,
with `--clock wall`, a compressed wall clock), and the offline anchor beside
it. Both write the trace they used (trace.csv), every figure and every job's
record (result.json), plots (PNG) and a report (report.md) into DIR. `stats`
prints what the generator would take from an Alibaba GPU trace.

Exit status: 0 done, 1 no local cluster running, 2 bad input (a flag, a
trace, a file), 3 the cluster did not answer in time (it is still there;
run the command again once it has caught up)."""

import argparse
import json
import sys
from pathlib import Path

from localsim.commands.running import NotRunningError
from simdevice.topology import GENERATIONS, PROJECTED_GENERATIONS, rack_spec
from whatif.kueue import STRATEGIES as KUEUE_STRATEGIES
from whatif.livecluster import SETTLE_TIMEOUT, live
from whatif.offlinerun import offline
from whatif.trace import read_alibaba_v2023, trace_stats

CLOCKS = ("settle", "wall")


def _source(p: argparse.ArgumentParser) -> None:
    """Where the jobs come from, how the anchor replays them, and the output
    directory: shared by offline and live."""
    source = p.add_mutually_exclusive_group()
    source.add_argument("--trace", type=Path, help="a trace CSV this command wrote")
    source.add_argument(
        "--alibaba", type=Path, help="an openb_pod_list CSV (cluster-trace-gpu-v2023)"
    )
    p.add_argument("--jobs", type=int, default=2000, help="jobs to generate")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--load", type=float, default=0.9, help="offered load of generated jobs")
    p.add_argument("--mix", default="", help="job kinds and weights, e.g. cores-1=0.6,serverx4=0.1")
    p.add_argument(
        "--priority",
        default="",
        help="priorities of generated job kinds, e.g. rack=10 (others 0); they order the "
        "queue of replays through Kueue",
    )
    p.add_argument(
        "--work",
        default="",
        help="what generated jobs compute (a workload spec as JSON); durations then come "
        "from the simulated cores of the generation replayed",
    )
    p.add_argument(
        "--max-duration-hours", type=float, help="cut generated durations to this many hours"
    )
    p.add_argument("--no-gangs", action="store_true", help="place a job's pods one by one")
    p.add_argument(
        "--with-spread",
        action="store_true",
        help="also replay the anchor with the spread placement rule (each pod on the emptiest "
        "server, as the default scheduler scores): jobs with work run longer where their chips "
        "spread",
    )
    p.add_argument("--out", type=Path, default=Path("whatif-out"))
    p.add_argument("--chip-mtbf-hours", type=float, help="mean hours between one chip's failures")
    p.add_argument("--core-mtbf-hours", type=float, help="mean hours between one core's failures")
    p.add_argument("--repair-hours", type=float, default=4.0, help="time a failed device is out")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="trainium-dra whatif", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)
    off = sub.add_parser("offline", help="replay a trace with the offline anchor")
    off.add_argument(
        "--generation",
        default="trn3-gen2",
        choices=GENERATIONS + PROJECTED_GENERATIONS,
        help="the racks' generation; trn4-whatif is Trainium4 from announced figures only",
    )
    off.add_argument("--racks", type=int, default=10)
    off.add_argument(
        "--with-kueue",
        action="store_true",
        help="also replay with a quota in front of placement, as Kueue admits: "
        "kueue-strict (StrictFIFO) and kueue-best-effort (BestEffortFIFO)",
    )
    off.add_argument(
        "--partition-sizes",
        default=None,
        help="core partitions the site offers besides whole chips, e.g. 1,2 (default 1,2,4); "
        "live takes the cluster's",
    )
    _source(off)
    live = sub.add_parser("live", help="replay a trace through the real scheduler")
    live.add_argument(
        "--state-dir", type=Path, default=None, help="the local cluster's state directory"
    )
    _source(live)
    live.add_argument(
        "--clock",
        choices=CLOCKS,
        default="settle",
        help="settle (default): simulated time stands still while the cluster works and "
        "jumps to the next event once it has settled, so figures do not depend on the "
        "machine; wall: simulated time is wall time times a speed-up, to watch a replay live",
    )
    speed = live.add_mutually_exclusive_group()
    speed.add_argument(
        "--speedup", type=float, help="--clock wall: simulated seconds per wall second"
    )
    speed.add_argument(
        "--minutes",
        type=float,
        help="--clock wall: wall minutes the trace takes if no job waits (sets the "
        "speed-up; default 10)",
    )
    live.add_argument(
        "--idle-seconds",
        type=float,
        help="--clock wall: after the last arrival, stop when no pod has bound for this "
        "long (default 330: longer than the 5 minutes the scheduler may leave an "
        "unschedulable pod unretried)",
    )
    live.add_argument(
        "--settle-timeout",
        type=float,
        default=SETTLE_TIMEOUT,
        help="--clock settle: wall seconds to wait for the cluster to settle at one event "
        "before going on (logged and counted; default 300)",
    )
    live.add_argument("--namespace", default="whatif")
    live.add_argument(
        "--requests",
        choices=("claims", "extended"),
        default=None,
        help="how pods of cores and chips ask: a ResourceClaim each (default without "
        "--kueue), or the extended resources of the chart's DeviceClasses, as for the Neuron "
        "device plugin (with --kueue, pods of every kind ask that way)",
    )
    live.add_argument(
        "--kueue",
        choices=tuple(KUEUE_STRATEGIES),
        default=None,
        help="put every job through Kueue first, in a ClusterQueue whose quota is the "
        "fleet's cores, queueing strict (StrictFIFO) or best-effort (BestEffortFIFO); the "
        "cluster must run it (`trainium-dra up --with-kueue`; docs/queues.md)",
    )
    live.add_argument(
        "--scheduler-name",
        default=None,
        help="the scheduler profile that places the pods, e.g. trainium-dra-binpack "
        "(default: the default scheduler)",
    )
    stats = sub.add_parser("stats", help="the generator's inputs from an Alibaba GPU trace")
    stats.add_argument("alibaba", type=Path)
    stats.add_argument("--generation", default="trn3-gen2", choices=GENERATIONS)
    return p


def stats(args: argparse.Namespace) -> int:
    jobs, skipped = read_alibaba_v2023(args.alibaba, rack_spec(args.generation))
    found = trace_stats(jobs)
    print(json.dumps({"skipped": dict(skipped), **found.__dict__}, indent=2, default=list))
    return 0


def exit_status(err: NotRunningError | ValueError | OSError) -> int:
    """A timeout is an OSError but not the user's mistake: a cluster too slow
    to delete the replay's namespace or queues is worth a retry, where bad
    input (JobError, TraceError, TopologyError, a missing file) is not."""
    if isinstance(err, NotRunningError):
        return 1
    if isinstance(err, TimeoutError):
        return 3
    return 2


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    commands = {"offline": offline, "live": live, "stats": stats}
    try:
        return commands[args.command](args)
    except (NotRunningError, ValueError, OSError) as err:
        status = exit_status(err)
        reason = "the cluster did not answer in time: " if status == 3 else ""
        print(f"trainium-dra whatif: {reason}{err}", file=sys.stderr)
        return status


if __name__ == "__main__":
    sys.exit(main())
