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
prints what the generator would take from an Alibaba GPU trace."""

import argparse
import importlib.util
import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, TypeVar

from kubernetes.client import ApiClient

from driver.devicemodel.layout import PARTITION_SIZES
from driver.kubeapi.apiserver import ApiServer
from driver.kubeapi.objects import Objects
from driver.kubeapi.resources import CRDS, DEVICE_CLASSES
from localsim.commands.flags import parse_sizes
from localsim.commands.running import NotRunningError, open_running
from localsim.kueue.queues import CLUSTER_QUEUE as DEFAULT_CLUSTER_QUEUE
from localsim.paths import ClusterPaths
from localsim.state import default_state_dir
from simdevice.topology import GENERATIONS, PROJECTED_GENERATIONS, RackSpec, rack_spec
from whatif.faults import HOUR, Failures, FaultRates, RandomFailures, ScriptedFailures
from whatif.figures import percentile, summarize
from whatif.fleet import POLICIES, SPREAD
from whatif.jobdiff import diff
from whatif.jobobjects import PodStyle
from whatif.jobs import KINDS, Job, JobError, check_fits, offered
from whatif.jobtimes import parse_work, timed_all
from whatif.kueue import CLUSTER_QUEUES, KueueQueue
from whatif.kueue import NAME as KUEUE_NAME
from whatif.kueue import STRATEGIES as KUEUE_STRATEGIES
from whatif.live import (
    REQUEST_TIMEOUT,
    USER_AGENT,
    FaultTargets,
    LiveResult,
    WallClock,
    replay_live,
)
from whatif.observe import attempts_spent, cpu_seconds, cpu_spent, scheduler_attempts
from whatif.offline import KUEUE_QUEUEING, QUEUEING, replay
from whatif.plots import label, write_plots, write_timelines
from whatif.replay import Replay
from whatif.report import markdown
from whatif.settleclock import SettleClock
from whatif.trace import (
    TraceSpec,
    generate,
    read_alibaba_v2023,
    read_trace,
    trace_stats,
    write_trace,
)

CLOCKS = ("settle", "wall")
V = TypeVar("V")
SETTLE_TIMEOUT = 300.0


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


EXTENDED_CLASSES: Final = {
    "cores": ("neuroncore", "core"),
    "chips": ("chip", "chip"),
    "server": ("server", "server"),
    "rack": ("ultraserver", "ultraserver"),
}
"""Shape kind -> (DeviceClass prefix, the chart's `extendedResources` key)."""


def extended_resources(api: ApiClient, driver: str, kinds: Sequence[str]) -> dict[str, str]:
    """Shape kind -> the extended resource its DeviceClass carries, as the
    chart installed them (`extendedResources` in its values)."""
    found = {}
    objects = Objects(ApiServer(api.configuration, USER_AGENT, REQUEST_TIMEOUT))
    for kind in kinds:
        prefix, value = EXTENDED_CLASSES[kind]
        device_class = f"{prefix}.{driver}"
        obj = objects.get(DEVICE_CLASSES, device_class) or {"spec": {}}
        name = obj["spec"].get("extendedResourceName")
        if not name:
            raise JobError(
                f"DeviceClass {device_class} has no extendedResourceName: install the chart "
                f"with extendedResources.{value} set (`trainium-dra up --with-kueue` sets every "
                "one), or ask with --requests claims and no --kueue"
            )
        found[kind] = name
    return found


def kueue_queue(
    api: ApiClient, strategy: str, extended: Mapping[str, str], cores: int, jobs: Sequence[Job]
) -> KueueQueue:
    """The replay's queue for `jobs`, once Kueue is known to run on the
    cluster and to count every job in cores (its default ClusterQueue then
    covers no other Trainium resource)."""
    objects = Objects(ApiServer(api.configuration, USER_AGENT, REQUEST_TIMEOUT))
    start = "start the cluster with `trainium-dra up --with-kueue --kueue-quota cores`"
    if objects.get(CRDS, f"{CLUSTER_QUEUES.plural}.{CLUSTER_QUEUES.group}") is None:
        raise JobError(f"--kueue: this cluster does not run Kueue; {start}")
    default = objects.get(CLUSTER_QUEUES, DEFAULT_CLUSTER_QUEUE) or {"spec": {}}
    covered = {
        name
        for group in default["spec"].get("resourceGroups") or ()
        for name in group["coveredResources"]
    }
    apart = sorted(covered & (set(extended.values()) - {extended["cores"]}))
    if apart:
        raise JobError(
            f"--kueue: this cluster's Kueue counts {', '.join(apart)} apart from cores, so a "
            f"quota of cores would not cover them; {start}"
        )
    priorities = frozenset(j.priority for j in jobs if j.priority)
    return KueueQueue(strategy, extended["cores"], cores, priorities)


def bearer_token(api: ApiClient) -> str:
    """The Authorization header value `api` sends, for the scheduler's /metrics."""
    key = api.configuration.get_api_key_with_prefix
    return str(key("BearerToken") or key("authorization") or "")


class Observer:
    """The cluster's CPU by process, the scheduler's attempts and the load
    average, from its construction to `done`."""

    def __init__(self, pids: Mapping[str, int], metrics: str | None, api: ApiClient) -> None:
        self.pids, self.metrics = {**pids, "whatif": os.getpid()}, metrics
        self.token = bearer_token(api)
        self.load = os.getloadavg()[0]
        self.cpu = cpu_seconds(self.pids)
        self.attempts = self._attempts()

    def _attempts(self) -> dict[str, dict[str, float]]:
        return scheduler_attempts(self.metrics, self.token) if self.metrics else {}

    def done(self) -> dict[str, Any]:
        return {
            "cpus": os.cpu_count(),
            "load_1min": {"before": round(self.load, 2), "after": round(os.getloadavg()[0], 2)},
            "cpu_seconds_by_process": cpu_spent(self.cpu, cpu_seconds(self.pids)),
            "scheduler_attempts": attempts_spent(self.attempts, self._attempts()),
        }


def speedup_for(jobs: list[Job], minutes: float) -> float:
    """Simulated seconds per wall second that fit the trace into `minutes` if
    no job waited: until the last job would end after arriving."""
    span = max((j.arrival + j.duration for j in jobs), default=0.0)
    return max(1.0, span / (minutes * 60))


@dataclass(frozen=True)
class LiveCluster:
    """What a live replay needs of the cluster it runs on."""

    api: ApiClient
    rack: RackSpec
    racks: int
    driver: str
    partition_sizes: tuple[int, ...]
    pids: Mapping[str, int]
    """Its processes by name, to read their CPU time."""
    scheduler_metrics: str | None
    controller_metrics: str | None
    fault_targets: FaultTargets | None
    """None where failures cannot be injected."""
    servers: Mapping[str, tuple[int, int]]
    """Node -> its (rack, server)."""


def live(args: argparse.Namespace) -> int:
    paths = ClusterPaths((args.state_dir or default_state_dir()).absolute())
    with open_running(paths) as cluster:
        plans = cluster.spec.racks
        generations = {r.generation for r in plans}
        partial = [r.name for r in plans if r.nodes < r.servers]
        if len(generations) != 1 or partial:
            raise JobError(
                "the local cluster must be whole racks of one generation; start it with "
                "`trainium-dra up --racks N --generation G` and no --nodes-per-rack"
            )
        sockets = [str(cluster.paths.sim_control_socket(r.name)) for r in plans]
        targets = FaultTargets(sockets, [r.node_names() for r in plans])
        servers = {
            node: (r, s) for r, plan in enumerate(plans) for s, node in enumerate(plan.node_names())
        }
        return replay_on(
            LiveCluster(
                cluster.api,
                rack_spec(plans[0].generation),
                len(plans),
                cluster.spec.driver,
                cluster.spec.partition_sizes or PARTITION_SIZES,
                cluster.pids,
                cluster.scheduler_metrics,
                cluster.controller_metrics,
                targets if all(Path(s).exists() for s in sockets) else None,
                servers,
            ),
            args,
        )


def live_clock(
    args: argparse.Namespace, jobs: list[Job], cluster: LiveCluster
) -> WallClock | SettleClock:
    """The clock the flags ask for; a flag of the other clock is refused."""
    if args.clock == "wall":
        if args.settle_timeout != SETTLE_TIMEOUT:
            raise JobError("--settle-timeout: only with --clock settle")
        speedup = args.speedup or speedup_for(jobs, args.minutes or 10.0)
        return WallClock(speedup, args.idle_seconds or 330.0)
    for flag in ("speedup", "minutes", "idle_seconds"):
        if getattr(args, flag) is not None:
            name = "--" + flag.replace("_", "-")
            raise JobError(f"{name}: only with --clock wall (the settle clock has no speed-up)")
    if cluster.scheduler_metrics is None:
        raise JobError(
            "--clock settle reads the scheduler's /metrics, which this cluster does not "
            "serve; replay with --clock wall"
        )
    return SettleClock(
        cluster.scheduler_metrics,
        bearer_token(cluster.api),
        cluster.controller_metrics,
        timeout=args.settle_timeout,
    )


def clock_fields(got: LiveResult) -> dict[str, Any]:
    """What result.json says of the clock: its kind, and the speed-up or how
    the settle clock spent its wall time."""
    if isinstance(got.clock, WallClock):
        return {"clock": "wall", "speedup": got.clock.speedup}
    settle = got.settle
    assert settle is not None
    return {
        "clock": "settle",
        "settle": {
            "events": settle.events,
            "wall_s_p50": settle.wall_p50,
            "wall_s_max": settle.wall_max,
            "timeouts": settle.timeouts,
            "per_event": settle.costs,
        },
    }


def replay_on(cluster: LiveCluster, args: argparse.Namespace) -> int:
    """The live replay `args` ask for on `cluster`, the anchor beside it, and
    every output file."""
    rack, racks = cluster.rack, cluster.racks
    rates = fault_rates(args)
    failing = bool(rates.chip_mtbf_hours or rates.core_mtbf_hours)
    if failing and cluster.fault_targets is None:
        raise JobError(
            "--chip-mtbf-hours/--core-mtbf-hours: failures are injected through the "
            "stand-in's simulator-control sockets, which this cluster has not; "
            "replay without failures here"
        )
    jobs = jobs_of(args, rack, racks, cluster.partition_sizes)
    clock = live_clock(args, jobs, cluster)
    requests = args.requests or ("extended" if args.kueue else "claims")
    if args.kueue and requests == "claims":
        raise JobError(
            "--kueue with --requests claims: Kueue counts what pods request, not claims by "
            "name; leave --requests out (pods then ask by extended resource name)"
        )
    kinds = KINDS if args.kueue else ("cores", "chips")
    extended = (
        extended_resources(cluster.api, cluster.driver, kinds) if requests == "extended" else {}
    )
    queue = (
        kueue_queue(cluster.api, args.kueue, extended, racks * rack.cores, jobs)
        if args.kueue
        else None
    )
    args.out.mkdir(parents=True, exist_ok=True)
    write_trace(args.out / "trace.csv", jobs)
    pace = "settle clock" if isinstance(clock, SettleClock) else f"{clock.speedup:g}x"
    print(f"replaying {len(jobs)} jobs on {racks} racks ({pace})", flush=True)
    watch = Observer(cluster.pids, cluster.scheduler_metrics, cluster.api)
    got = replay_live(
        cluster.api,
        jobs,
        rack,
        racks,
        namespace=args.namespace,
        driver=cluster.driver,
        clock=clock,
        gangs=not args.no_gangs,
        style=PodStyle(
            extended, scheduler=args.scheduler_name, queue=KUEUE_NAME if queue else None
        ),
        kueue=queue,
        failures=RandomFailures(rates, rack, racks, args.seed) if failing else None,
        fault_targets=cluster.fault_targets,
        servers=cluster.servers,
        progress=lambda msg: print(msg, flush=True),
    )
    cost = watch.done()
    repair = rates.repair_hours * HOUR
    anchor = anchor_runs(
        jobs,
        rack,
        racks,
        gangs=not args.no_gangs,
        failures=lambda: ScriptedFailures(got.failures, repair),
        queueings=QUEUEING + KUEUE_QUEUEING if queue else QUEUEING,
        policies=(*POLICIES, SPREAD) if args.with_spread else POLICIES,
    )
    runs = [got.replay, *anchor]
    result = {
        "trace": str(args.out / "trace.csv"),
        **clock_fields(got),
        "wall_seconds": round(got.wall_seconds, 1),
        "bind_latency_wall_s": {
            "p50": percentile(got.bind_latency_s, 0.5),
            "p90": percentile(got.bind_latency_s, 0.9),
            "max": max(got.bind_latency_s, default=None),
        },
        "runs": [summarize(run) for run in runs],
        "diff": [diff(got.replay, a) for a in anchor],
        "jobs": job_records(runs),
        **cost,
    }
    how = (
        "on the settle clock"
        if isinstance(clock, SettleClock)
        else f"at {clock.speedup:g} simulated seconds a wall second"
    )
    title = (
        f"the real kube-scheduler {how} ({got.wall_seconds:,.0f} s of wall time), "
        "beside the offline anchor"
    )
    write_outputs(args.out, result, runs, title)
    return 0


def stats(args: argparse.Namespace) -> int:
    jobs, skipped = read_alibaba_v2023(args.alibaba, rack_spec(args.generation))
    found = trace_stats(jobs)
    print(json.dumps({"skipped": dict(skipped), **found.__dict__}, indent=2, default=list))
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    commands = {"offline": offline, "live": live, "stats": stats}
    try:
        return commands[args.command](args)
    except NotRunningError as err:
        print(f"trainium-dra whatif: {err}", file=sys.stderr)
        return 1
    except (ValueError, OSError) as err:  # JobError, TraceError, TopologyError, bad rates
        print(f"trainium-dra whatif: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
