"""`trainium-dra whatif live`: the running local cluster as a live replay
needs it (whole racks of one generation, its fault sockets, Kueue and the
extended resources it counts), the clock the flags ask for, and the replay
through the real scheduler with the offline anchor beside it."""

import argparse
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from kubernetes.client import ApiClient

from driver.devicemodel.layout import PARTITION_SIZES
from driver.kubeapi.apiserver import ApiServer
from driver.kubeapi.objects import Objects
from driver.kubeapi.resources import CRDS, DEVICE_CLASSES
from localsim.commands.running import open_running
from localsim.kueue.queues import CLUSTER_QUEUE as DEFAULT_CLUSTER_QUEUE
from localsim.paths import ClusterPaths
from localsim.state import default_state_dir
from simdevice.topology import RackSpec, rack_spec
from whatif.faults import HOUR, RandomFailures, ScriptedFailures
from whatif.figures import percentile, summarize
from whatif.fleet import POLICIES, SPREAD
from whatif.jobdiff import diff
from whatif.jobobjects import PodStyle
from whatif.jobs import KINDS, Job, JobError
from whatif.kueue import CLUSTER_QUEUES, KueueQueue
from whatif.kueue import NAME as KUEUE_NAME
from whatif.live import (
    REQUEST_TIMEOUT,
    USER_AGENT,
    FaultTargets,
    LiveResult,
    WallClock,
    replay_live,
)
from whatif.observe import attempts_spent, cpu_seconds, cpu_spent, scheduler_attempts
from whatif.offline import KUEUE_QUEUEING, QUEUEING
from whatif.offlinerun import anchor_runs, fault_rates, job_records, jobs_of, write_outputs
from whatif.settleclock import SettleClock
from whatif.trace import write_trace

SETTLE_TIMEOUT = 300.0
"""Wall seconds the settle clock waits at one event unless --settle-timeout says."""


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
