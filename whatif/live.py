"""The replay through the real scheduler: a trace's jobs created on a running
local cluster, placed by the real kube-scheduler on the driver's published
devices, each ended by deleting its pods once its pods have held their
devices for its duration.

Two clocks. The settle clock (the default) keeps simulated time still while
the cluster works: at each event time (arrivals, ends, failures, repairs) the
replay makes its writes, waits until the cluster has settled — every pod it
wants exists and is bound or reported unschedulable, every pod it deleted is
gone with its claims, and the scheduler has no pod to try or to bind and has
stopped moving (`SettleClock`) — then jumps to the next event. Results then
do not depend on how fast the machine is. The wall clock makes simulated time
wall time since the start times a speed-up: a replay to watch live, whose
queueing includes the scheduler's own latency times the speed-up.

A job starts when the last of its pods is bound (its claims are allocated
then) and ends its duration later. A job with work runs as long as its work
takes on the chips its claims were allocated (`whatif.claimplaces`,
`whatif.placetimes`), so where the scheduler put it decides when it
ends; that is known when it starts, so the clock needs no event of its own
for it. With failures, the replay injects each into the simulated hardware of
the node it falls on and clears it after the repair time; the driver taints
the failed devices and Kubernetes evicts the pods on them. A job that loses a
pod that way is deleted whole and created again, to run from the start."""

import heapq
import logging
import queue
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_futures
from contextlib import ExitStack
from dataclasses import dataclass, field
from functools import partial

from kubernetes import client

from driver.devicemodel.ultraserver import SpecError, UltraServerSpec, parse_spec
from driver.kubeapi.apiserver import ApiError, ApiServer
from driver.kubeapi.objects import Objects
from driver.kubeapi.resources import CLAIMS, NAMESPACES, SLICES, ULTRASERVERS
from simdevice.topology import RackSpec
from whatif.claimplaces import FleetDevices, HeldDevices
from whatif.faults import Failure, Failures
from whatif.figures import percentile
from whatif.jobobjects import CLAIMS as CLAIM_PODS
from whatif.jobobjects import PodStyle, job_objects, pod_name
from whatif.jobs import Job
from whatif.kueue import KueueQueue
from whatif.kueuewatch import LAST_QUIET, KueueWatch, spacing, through_kueue
from whatif.livefaults import (
    FaultAction,
    FaultClock,
    claims_on,
    failed_devices,
    fault_request,
)
from whatif.observe import WorkMetrics, WorkState
from whatif.placetimes import duration_on
from whatif.podwatch import PodEvent, PodWatch
from whatif.replay import JobRecord, Replay, Sample
from whatif.settleclock import Deciders, SettleClock, SettleStats, Step, needs_baseline
from whatif.settlecost import SettleCosts
from whatif.writer import Writer, set_fault

log = logging.getLogger(__name__)
USER_AGENT = "trainium-dra-whatif"
REQUEST_TIMEOUT = 30.0
CREATORS = 4
POLL = 0.02
"""Wall seconds between looks at a cluster that has not settled."""
NAMESPACE_WAIT = 1.0
"""Wall seconds a settle waits for a pod or claim event while the namespace
does not yet show the writes (it wakes at the event; this bounds a wait
for one that will not come, as after a watch's restart)."""
DECIDERS_WAIT = 0.1
"""Wall seconds between readings of a scheduler that has work or has not yet
taken up the writes, unless a pod event comes first (a binding, a pod
reported unschedulable). Each reading is a /metrics text the scheduler
renders while it works: polled every POLL, most of a trial's readings were
of a busy scheduler."""
TAINTS_SETTLE = 1.0
"""Wall seconds a fault's taints must stand still before the replay goes on."""
ALLOCATION_WAIT = 30.0
"""Wall seconds a started job with work waits for its claims' allocations
to reach the replay's watch (they were written before its pods bound)."""


@dataclass(frozen=True)
class WallClock:
    """Simulated seconds are wall seconds since the start times `speedup`."""

    speedup: float
    idle_seconds: float = 330.0
    """After the last arrival, stop when no pod has bound for this long."""


@dataclass
class LiveJob:
    """One job's runs, in simulated seconds."""

    job: Job
    created: float | None = None
    created_wall: float | None = None
    attempt: int = 0
    """Runs begun again after evictions; names this run's pods."""
    bound: dict[str, str] = field(default_factory=dict)
    """Pod of this run -> its node."""
    start: float | None = None
    start_wall: float | None = None
    end: float | None = None
    spread: float | None = None
    """Seconds its run takes beyond its packed duration for where its chips
    are (0 without work); None until it starts, or where its chips could not
    be read."""
    evicted_runs: list[tuple[float, float]] = field(default_factory=list)
    """(start, eviction) of every run a failure cut short."""

    def pods(self) -> list[str]:
        return [pod_name(self.job, i, self.attempt) for i in range(self.job.pods)]


@dataclass(frozen=True)
class FaultTargets:
    """Where a failure in rack r, server s is sent: `sockets[r]`, the
    simulator-control socket serving the rack, for node `nodes[r][s]`."""

    sockets: Sequence[str]
    nodes: Sequence[Sequence[str]]


@dataclass(frozen=True)
class LiveResult:
    replay: Replay
    clock: WallClock | SettleClock
    wall_seconds: float
    bind_latency_s: list[float]
    """Wall seconds from a job's creation to its last pod's binding."""
    failures: list[Failure]
    """What was injected, in simulated seconds, for the anchor to replay."""
    settle: SettleStats | None = None


class _LiveRun:
    """The replay's state in simulated seconds, whichever clock drives it."""

    def __init__(
        self,
        objects: Objects,
        pool: ThreadPoolExecutor,
        jobs: Sequence[Job],
        *,
        namespace: str,
        driver: str,
        gangs: bool,
        style: PodStyle,
        servers: Mapping[str, tuple[int, int]],
        watch: PodWatch,
        rack: RackSpec,
        devices: FleetDevices,
        kueue: KueueWatch | None = None,
    ) -> None:
        self.objects, self.pool, self.namespace, self.driver = objects, pool, namespace, driver
        self.watch, self.rack, self.devices = watch, rack, devices
        self.kueue = kueue
        self.gangs, self.style, self.servers = gangs, style, servers
        self.released: set[int | None] = set()
        """Racks this event time's deletions gave devices back on (None: unknown)."""
        self.writer = Writer(objects)
        self.live = {j.name: LiveJob(j) for j in sorted(jobs, key=lambda j: (j.arrival, j.name))}
        self.arrivals = list(self.live.values())
        self.next_arrival = 0
        self.ends: list[tuple[float, str, int]] = []
        self.deleting: set[str] = set()
        """Pods the replay deleted itself: their going is no eviction."""
        self.writes: list[Future[None]] = []
        self.deletions = 0
        """Runs the replay has deleted so far (ended or evicted)."""
        self.creations = 0
        self.costs = SettleCosts()

    def _due(self, now: float) -> bool:
        return (
            self.next_arrival < len(self.arrivals)
            and self.arrivals[self.next_arrival].job.arrival <= now
        )

    def arrive(self, now: float) -> None:
        if self._due(now) and self.style.queue and self.next_arrival:
            # Jobs arriving later must queue behind every job before them.
            # Without a watch of the Workloads, the latest may be this second's.
            wall = time.time()
            latest = self.kueue.latest_created() if self.kueue is not None else None
            with self.costs.part("spacing"):
                time.sleep(spacing(wall, wall if latest is None else latest))
        while self._due(now):
            entry = self.arrivals[self.next_arrival]
            entry.created, entry.created_wall = now, time.monotonic()
            self._create(entry)
            self.next_arrival += 1

    def end_due(self, now: float) -> None:
        while self.ends and self.ends[0][0] <= now:
            _, name, attempt = heapq.heappop(self.ends)
            entry = self.live[name]
            if entry.attempt == attempt and entry.start is not None:
                entry.end = now
                self._delete(entry)

    def see(self, event: PodEvent, now: float) -> bool:
        """Take one pod event at simulated `now`; True if a pod was bound."""
        entry = self.live[event.job]
        if event.kind == "gone":
            if event.pod in self.deleting:
                self.deleting.discard(event.pod)
            elif event.pod in entry.pods() and entry.end is None:
                self._evict(entry, now)
            return False
        if event.pod not in entry.pods():
            return False
        entry.bound[event.pod] = event.node
        if len(entry.bound) == entry.job.pods and entry.start is None:
            entry.start, entry.start_wall = now, event.wall
            duration = self._duration(entry)
            heapq.heappush(self.ends, (now + duration, event.job, entry.attempt))
        return True

    def _duration(self, entry: LiveJob) -> float:
        """How long the run that starts now takes, with its `spread` set: a
        job with work on the chips its claims got, any other its duration."""
        job = entry.job
        entry.spread = 0.0
        if job.work is None:
            return job.duration
        entry.spread = None
        results = self.watch.allocations(entry.pods(), ALLOCATION_WAIT)
        if results is None:
            log.warning("job %s: no allocations seen; it runs its duration", job.name)
            return job.duration
        places = self.devices.places(HeldDevices(entry.bound[p], results[p]) for p in results)
        if places is None:
            log.warning("job %s: devices the model does not name; it runs its duration", job.name)
            return job.duration
        duration = duration_on(job, self.rack, places)
        entry.spread = duration - job.duration
        return duration

    def _evict(self, entry: LiveJob, now: float) -> None:
        """One of the job's pods was evicted: the rest go too, and the job
        starts over under new names (the gang's PodGroup stays)."""
        if entry.start is not None:
            entry.evicted_runs.append((entry.start, now))
            entry.start = None
        self._delete(entry)
        entry.attempt += 1
        entry.bound = {}
        self._create(entry)

    def _create(self, entry: LiveJob) -> None:
        objects = job_objects(
            entry.job,
            self.namespace,
            self.driver,
            self.gangs,
            attempt=entry.attempt,
            style=self.style,
        )
        self.creations += 1
        self.writes.append(self.pool.submit(self.writer.create, objects))

    def _delete(self, entry: LiveJob) -> None:
        """The pods of the job's current run, and their claims if it made any."""
        pods = entry.pods()
        self.deletions += 1
        self.released.update(self._rack_of(node) for node in entry.bound.values())
        self.deleting.update(pods)
        claims = self.style.resource(entry.job) is None
        grouped = bool(self.style.queue) and entry.job.pods > 1
        self.writes.append(
            self.pool.submit(self.writer.delete, self.namespace, pods, claims, release=grouped)
        )

    def writes_done(self, timeout: float | None = None) -> bool:
        """Wait up to `timeout` for the writes made so far; True when all are done."""
        pending = wait_futures(self.writes, timeout=timeout).not_done
        self.writes = list(pending)
        return not pending

    def wanted(self) -> list[str]:
        """Pods that should exist now: those of every arrived job not ended."""
        return [
            pod
            for entry in self.arrivals[: self.next_arrival]
            if entry.end is None
            for pod in entry.pods()
        ]

    def pod_cores(self) -> dict[str, int]:
        """The cores each pod of an arrived job's current run holds."""
        return {
            pod: entry.job.shape.cores(self.rack)
            for entry in self.arrivals[: self.next_arrival]
            for pod in entry.pods()
        }

    def _rack_of(self, node: str) -> int | None:
        where = self.servers.get(node)
        return None if where is None else where[0]

    def needs_controller(self) -> bool:
        """Whether the controller's next reconcile may change what the
        scheduler can place: a rack job waits and a release left a rack with
        no pod on it, whose rack device the controller advertises again."""
        if not any(
            e.start is None and e.job.shape.kind == "rack"
            for e in self.arrivals[: self.next_arrival]
        ):
            return False
        held = {
            self._rack_of(node)
            for e in self.live.values()
            if e.end is None
            for node in e.bound.values()
        }
        return any(r is None or r not in held for r in self.released)

    def running(self) -> int:
        return sum(1 for e in self.live.values() if e.start is not None and e.end is None)

    def started(self) -> int:
        return sum(1 for e in self.live.values() if e.start is not None)

    def arrived_all(self) -> bool:
        return self.next_arrival == len(self.arrivals)

    def waiting(self) -> bool:
        """Some job that arrived has not started (or was evicted and waits again)."""
        return any(e.start is None for e in self.arrivals[: self.next_arrival])

    def next_event(self) -> float | None:
        """The next arrival or end, simulated seconds; None if none is left."""
        times = []
        if not self.arrived_all():
            times.append(self.arrivals[self.next_arrival].job.arrival)
        if self.ends:
            times.append(self.ends[0][0])
        return min(times, default=None)


class _Faults:
    """Sends the fault clock's actions to the simulator-control sockets."""

    def __init__(self, clock: FaultClock, rack: RackSpec, targets: FaultTargets) -> None:
        self.clock, self.rack, self.targets = clock, rack, targets

    def send(self, action: FaultAction) -> None:
        r, server, _ = action.failure.chip
        body = fault_request(action.failure, self.rack, self.targets.nodes[r][server])
        set_fault(self.targets.sockets[r], body, action.inject)

    def clear_outstanding(self) -> None:
        for failure in self.clock.outstanding():
            self.send(FaultAction(failure.time, False, failure))


def replay_live(
    api: client.ApiClient,
    jobs: Sequence[Job],
    rack: RackSpec,
    racks: int,
    *,
    namespace: str,
    driver: str,
    clock: WallClock | SettleClock,
    gangs: bool = True,
    style: PodStyle = CLAIM_PODS,
    failures: Failures | None = None,
    fault_targets: FaultTargets | None = None,
    servers: Mapping[str, tuple[int, int]] | None = None,
    kueue: KueueQueue | None = None,
    progress: Callable[[str], None] = lambda _: None,
) -> LiveResult:
    """Replay `jobs` (their durations already for `rack`'s generation, a job
    with work's the packed one) on the cluster `api` reaches; every object
    goes into `namespace`, which is created and deleted here. `failures` need
    `fault_targets`; `servers` maps a node to its (rack, server), to record
    where each job ran and number the chips of jobs with work, which need it;
    with `kueue` every job waits in that queue (`style` must name its
    LocalQueue)."""
    if failures is not None and fault_targets is None:
        raise ValueError("fault_targets: failures need the simulator-control sockets to send to")
    if servers is None and any(j.work is not None for j in jobs):
        raise ValueError("servers: jobs with work are timed on their chips, numbered by node")
    objects = Objects(ApiServer(api.configuration, USER_AGENT, REQUEST_TIMEOUT))
    devices = FleetDevices(driver, _ultraservers(objects), servers or {})
    try:
        objects.create(NAMESPACES, {"metadata": {"name": namespace}})
    except ApiError as err:
        if err.status != 409:
            raise
        raise ValueError(
            f"--namespace: {namespace} exists (an earlier replay's, still being deleted?); "
            "wait until it is gone, or name another"
        ) from err
    pods = PodWatch(objects.server, namespace)
    faults = (
        _Faults(FaultClock(failures), rack, fault_targets)
        if failures is not None and fault_targets is not None
        else None
    )
    settle: SettleStats | None = None
    with ExitStack() as stack:
        watch = stack.enter_context(through_kueue(objects, kueue, namespace)) if kueue else None
        pods.start()
        began = time.monotonic()
        with ThreadPoolExecutor(CREATORS) as pool:
            run = _LiveRun(
                objects,
                pool,
                jobs,
                namespace=namespace,
                driver=driver,
                gangs=gangs,
                style=style,
                servers=servers or {},
                watch=pods,
                rack=rack,
                devices=devices,
                kueue=watch,
            )
            try:
                if isinstance(clock, SettleClock):
                    settle = _settle_loop(run, pods, clock, faults, progress, kueue=watch)
                else:
                    _wall_loop(run, pods, clock, faults, progress)
            finally:
                pods.close()
                if faults is not None:
                    faults.clear_outstanding()
        wall = time.monotonic() - began
        progress(f"deleting namespace {namespace}")
        delete_namespace(objects, namespace)
    injected = faults.clock.injected if faults is not None else []
    return LiveResult(
        _as_replay(
            run.live.values(),
            rack,
            racks=racks,
            gangs=gangs,
            failures=len(injected),
            servers=servers or {},
            queueing=kueue.queueing if kueue else "backfill",
        ),
        clock,
        wall,
        [
            e.start_wall - e.created_wall
            for e in run.live.values()
            if e.start_wall is not None and e.created_wall is not None
        ],
        list(injected),
        settle,
    )


def _ultraservers(objects: Objects) -> dict[str, UltraServerSpec]:
    """The cluster's racks by name, as the controller reads their specs."""
    found = {}
    for obj in objects.list_all(ULTRASERVERS):
        try:
            spec = parse_spec(obj)
        except SpecError:
            continue
        found[spec.name] = spec
    return found


def _wall_loop(
    run: _LiveRun,
    pods: PodWatch,
    clock: WallClock,
    faults: _Faults | None,
    progress: Callable[[str], None],
) -> None:
    """Simulated time runs with the wall clock; stop once every job has ended,
    or when nothing has bound for the clock's idle seconds after the last arrival."""
    t0 = time.monotonic()

    def sim(wall: float) -> float:
        return (wall - t0) * clock.speedup

    last_progress = t0
    started = 0
    while True:
        wall_now = time.monotonic()
        now = sim(wall_now)
        run.arrive(now)
        run.end_due(now)
        wakes = [now + clock.speedup]
        upcoming = run.next_event()
        if faults is not None:
            for action in faults.clock.due(now):
                run.pool.submit(faults.send, action)
            fault_next = faults.clock.next_time()
            if fault_next is not None:
                wakes.append(fault_next)
        if upcoming is not None:
            wakes.append(upcoming)
        if (
            run.arrived_all()
            and not run.running()
            and (
                all(e.end is not None for e in run.live.values())
                or wall_now - last_progress > clock.idle_seconds
            )
        ):
            return
        try:
            event = pods.events.get(timeout=max(0.0, (min(wakes) - now) / clock.speedup))
        except queue.Empty:
            continue
        if run.see(event, sim(event.wall)):
            last_progress = event.wall
            started = _report(run, started, progress)


def _report(run: _LiveRun, started: int, progress: Callable[[str], None]) -> int:
    now_started = run.started()
    if now_started // 100 > started // 100:
        progress(f"{now_started} of {len(run.live)} jobs running or ended")
    return now_started


def _settle_loop(
    run: _LiveRun,
    pods: PodWatch,
    clock: SettleClock,
    faults: _Faults | None,
    progress: Callable[[str], None],
    *,
    kueue: KueueWatch | None,
) -> SettleStats:
    """At each event time: the due events, then wait for the cluster to
    settle, then on to the next event time; stop when no event is left."""
    metrics = WorkMetrics(clock.metrics_url, clock.token, clock.controller_metrics_url, run.costs)
    spent: list[float] = []
    timeouts = 0
    started = 0
    now = 0.0
    try:
        while True:
            fault_due = faults.clock.due(now) if faults is not None else []
            began = time.monotonic()
            run.released.clear()
            baseline = _baseline(run, pods, metrics)
            before = Step(baseline, run.creations, run.deletions, bool(fault_due))
            run.arrive(now)
            run.end_due(now)
            if faults is not None and fault_due:
                with run.costs.part("faults"):
                    idle = partial(_controller_idle, metrics, bool(clock.controller_metrics_url))
                    applied = _apply_faults(
                        run, pods, faults, fault_due, timeout=clock.timeout, controller_idle=idle
                    )
                    if not applied:
                        timeouts += 1
            if not _settle(run, pods, metrics, clock, kueue, now=now, before=before):
                timeouts += 1
            spent.append(time.monotonic() - began)
            started = _report(run, started, progress)
            times = [t for t in (run.next_event(), _next_fault(faults, run)) if t is not None]
            if not times and kueue is not None and run.waiting() and kueue.moves_within(LAST_QUIET):
                continue  # Kueue moved after all: settle again at the same second
            if not times:
                costs = run.costs.summary(len(spent), sum(spent))
                return SettleStats(len(spent), percentile(spent, 0.5), max(spent), timeouts, costs)
            now = max(now, min(times))
    finally:
        metrics.close()


def _next_fault(faults: _Faults | None, run: _LiveRun) -> float | None:
    """The next failure or repair while a job runs; once none runs, only the
    next repair (a fleet that only waits breaks nothing)."""
    if faults is None:
        return None
    return faults.clock.next_time() if run.running() else faults.clock.next_repair()


def _baseline(run: _LiveRun, pods: PodWatch, metrics: WorkMetrics) -> WorkState | None:
    """The scheduler's state before this step's writes, if a pod waits."""
    view = pods.view(run.wanted(), run.deleting)
    return metrics.state(controller=False) if needs_baseline(view) else None


def _settle(
    run: _LiveRun,
    pods: PodWatch,
    metrics: WorkMetrics,
    clock: SettleClock,
    kueue: KueueWatch | None,
    *,
    now: float,
    before: Step,
) -> bool:
    """Take pod events until the cluster has settled; False if it did not
    within the clock's timeout."""
    deadline = time.monotonic() + clock.timeout
    deciders = Deciders(metrics.state, clock, before.state, costs=run.costs)
    why = "writes in flight"
    while time.monotonic() < deadline:
        pods.mark()
        _drain(run, pods, now)
        with run.costs.part("writes"):
            done = run.writes_done(timeout=POLL)
        if not done:
            why = "writes in flight"
            continue
        view = pods.view(run.wanted(), run.deleting)
        why, part = view.unsettled() or "", "pods"
        if not why:
            deciders.showing()
        if not why and view.queued and kueue is not None:
            why, part = kueue.why(*pods.queued_and_present(), run.pod_cores()) or "", "kueue"
        if not why and view.waiting:
            controller = bool(clock.controller_metrics_url) and run.needs_controller()
            why = deciders.moving(
                wrote=before.wrote(run.creations, run.deletions),
                controller=controller,
                waiting=view.waiting,
            )
            part = "deciders"
        if not why and pods.events.empty():
            return True
        with run.costs.part(part):
            if part == "pods":
                # Only a pod or claim event changes the namespace's view.
                pods.wait_change(NAMESPACE_WAIT)
            elif part == "deciders":
                pods.wait_change(DECIDERS_WAIT)
            else:
                time.sleep(POLL)
    log.warning("simulated second %.0f: not settled after %.0f s: %s", now, clock.timeout, why)
    return False


def _drain(run: _LiveRun, pods: PodWatch, now: float) -> None:
    while True:
        try:
            event = pods.events.get_nowait()
        except queue.Empty:
            return
        run.see(event, now)


def _controller_idle(metrics: WorkMetrics, known: bool) -> bool:
    """The controller has no rack or claim to write (True when its /metrics
    are not known: the taints' quiet window is then all there is)."""
    return not known or metrics.state(controller=True).controller == 0


def _apply_faults(
    run: _LiveRun,
    pods: PodWatch,
    faults: _Faults,
    actions: list[FaultAction],
    *,
    timeout: float,
    controller_idle: Callable[[], bool],
) -> bool:
    """Send `actions` and wait until the driver's slices show them and every
    pod on a newly failed device has gone (evicted) from the replay's view,
    so the clock moves on only once the failure took effect (an eviction seen
    later would be timed at a later simulated second). False if that took
    longer than `timeout` wall seconds, the settle clock's own bound."""
    before = failed_devices(run.objects.list_all(SLICES), run.driver)
    for action in actions:
        faults.send(action)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        failed = failed_devices(run.objects.list_all(SLICES), run.driver)
        if failed != before:
            break
        time.sleep(POLL * 5)
    else:
        log.warning("faults %s: the driver's slices did not change within %.0f s", actions, timeout)
        return False
    # The taints spread: the rack's reconcile writes the chip's slice, then
    # the slices of the server and rack devices over it, seconds apart on a
    # loaded machine. Go on once the controller has nothing left to write and
    # the taints have stood still a while with no pod left on them.
    stable_since = time.monotonic()
    while time.monotonic() < deadline:
        victims = claims_on(run.objects.list_all(CLAIMS), failed)
        if (
            not pods.any_present(victims)
            and time.monotonic() - stable_since > TAINTS_SETTLE
            and controller_idle()
            and failed_devices(run.objects.list_all(SLICES), run.driver) == failed
        ):
            return True
        time.sleep(POLL * 5)
        now_failed = failed_devices(run.objects.list_all(SLICES), run.driver)
        if now_failed != failed:
            failed, stable_since = now_failed, time.monotonic()
    log.warning("faults %s: pods on failed devices not evicted within %.0f s", actions, timeout)
    return False


def delete_namespace(objects: Objects, namespace: str, timeout: float = 300.0) -> None:
    """Delete the replay's namespace and wait until it is gone, so the next
    replay can create it again."""
    objects.delete(NAMESPACES, namespace, grace_seconds=0)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if objects.get(NAMESPACES, namespace) is None:
            return
        time.sleep(0.5)
    raise TimeoutError(f"namespace {namespace}: still there {timeout:.0f} s after its deletion")


def _as_replay(
    entries: Iterable[LiveJob],
    rack: RackSpec,
    *,
    racks: int,
    gangs: bool,
    failures: int,
    servers: Mapping[str, tuple[int, int]],
    queueing: str,
) -> Replay:
    """The live run in the offline anchor's terms."""
    records: list[JobRecord] = []
    events: list[tuple[float, int, int, int]] = []
    for e in entries:
        cores = e.job.cores(rack)
        end = e.end if e.start is not None else None
        lost = sum(evicted - began for began, evicted in e.evicted_runs) * cores
        where = sorted({servers[n] for n in e.bound.values() if n in servers})
        if e.job.shape.kind == "rack":  # its pod runs on one node, its devices span the rack
            where = [(r, s) for r in sorted({r for r, _ in where}) for s in range(rack.servers)]
        records.append(
            JobRecord(
                e.job,
                e.start,
                end,
                [],
                len(e.evicted_runs),
                lost,
                servers=where,
                spread_seconds=e.spread if e.start is not None else None,
                nodes=sorted(set(e.bound.values())),
            )
        )
        events.append((e.job.arrival, 0, 1, 0))
        for began, evicted in e.evicted_runs:
            events += [(began, cores, -1, 1), (evicted, -cores, 1, 2)]
        if e.start is not None:
            events.append((e.start, cores, -1, 1))
        if end is not None:
            events.append((end, -cores, 0, 2))
    samples: list[Sample] = []
    held = waiting = 0
    for when, cores, queued, _ in sorted(events, key=lambda x: (x[0], x[3])):
        held += cores
        waiting += queued
        samples.append(Sample(when, held, waiting, None))
    return Replay(
        rack, racks, "kube-scheduler", gangs, tuple(records), tuple(samples), failures, queueing
    )
