"""The replay through the real scheduler: a trace's jobs created on a running
local cluster on a compressed clock, placed by the real kube-scheduler on the
driver's published devices, each ended by deleting its pods once its pods
have held their devices for its duration.

Simulated time is wall time since the start times the speed-up. A job starts
when the last of its pods is bound (its claims are allocated then); its
queueing delay therefore includes the scheduler's own latency, times the
speed-up. With failures, the replay injects each into the simulated hardware
of the node it falls on and clears it after the repair time; the driver
taints the failed devices and Kubernetes evicts the pods on them. A job that
loses a pod that way is deleted whole and created again, to run from the
start. Jobs still unbound when nothing has bound for `idle_seconds` and no
arrival is left are reported as never run."""

import heapq
import queue
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from kubernetes import client

from driver.kubeapi.apiserver import ApiError, ApiServer
from driver.kubeapi.objects import Objects
from driver.kubeapi.resources import NAMESPACES
from driver.whatif.faults import Failure, Failures
from driver.whatif.jobobjects import CLAIMS, PodStyle, job_objects, pod_name
from driver.whatif.jobs import Job
from driver.whatif.livefaults import FaultClock, fault_request
from driver.whatif.podwatch import PodEvent, PodWatch
from driver.whatif.replay import JobRecord, Replay, Sample
from driver.whatif.writer import Writer, set_fault
from simdevice.topology import RackSpec

USER_AGENT = "trainium-dra-whatif"
REQUEST_TIMEOUT = 30.0

CREATORS = 4


@dataclass
class LiveJob:
    """One job on the wall clock (time.monotonic())."""

    job: Job
    created: float | None = None
    attempt: int = 0
    """Runs begun again after evictions; names this run's pods."""
    bound: set[str] = field(default_factory=set)
    start: float | None = None
    end: float | None = None
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
    speedup: float
    wall_seconds: float
    bind_latency_s: list[float]
    """Wall seconds from a job's creation to its last pod's binding."""
    failures: list[Failure]
    """What was injected, in simulated seconds, for the anchor to replay."""


class _LiveRun:
    """The replay's loop state: `replay_live` drives it."""

    def __init__(
        self,
        objects: Objects,
        pool: ThreadPoolExecutor,
        jobs: Sequence[Job],
        rack: RackSpec,
        *,
        namespace: str,
        driver: str,
        speedup: float,
        gangs: bool,
        style: PodStyle,
    ) -> None:
        self.pool, self.rack, self.namespace, self.driver = pool, rack, namespace, driver
        self.speedup, self.gangs, self.style = speedup, gangs, style
        self.writer = Writer(objects)
        self.live = {j.name: LiveJob(j) for j in sorted(jobs, key=lambda j: (j.arrival, j.name))}
        self.arrivals = list(self.live.values())
        self.next_arrival = 0
        self.ends: list[tuple[float, str, int]] = []
        self.deleting: set[str] = set()
        """Pods the replay deleted itself: their going is no eviction."""
        self.t0 = time.monotonic()

    def sim(self, wall: float) -> float:
        return (wall - self.t0) * self.speedup

    def wall(self, sim: float) -> float:
        return self.t0 + sim / self.speedup

    def arrive(self, now: float) -> None:
        while self.next_arrival < len(self.arrivals) and (
            self.wall(self.arrivals[self.next_arrival].job.arrival) <= now
        ):
            entry = self.arrivals[self.next_arrival]
            entry.created = now
            self._create(entry)
            self.next_arrival += 1

    def end_due(self, now: float) -> None:
        while self.ends and self.ends[0][0] <= now:
            _, name, attempt = heapq.heappop(self.ends)
            entry = self.live[name]
            if entry.attempt == attempt and entry.start is not None:
                entry.end = now
                self._delete(entry)

    def see(self, event: PodEvent) -> bool:
        """Take one pod event; True if a pod was bound."""
        entry = self.live[event.job]
        if event.kind == "gone":
            if event.pod in self.deleting:
                self.deleting.discard(event.pod)
            elif event.pod in entry.pods() and entry.end is None:
                self._evict(entry, event.wall)
            return False
        if event.pod not in entry.pods():
            return False
        entry.bound.add(event.pod)
        if len(entry.bound) == entry.job.pods and entry.start is None:
            entry.start = event.wall
            end = event.wall + entry.job.duration / self.speedup
            heapq.heappush(self.ends, (end, event.job, entry.attempt))
        return True

    def _evict(self, entry: LiveJob, now: float) -> None:
        """One of the job's pods was evicted: the rest go too, and the job
        starts over under new names (the gang's PodGroup stays)."""
        if entry.start is not None:
            entry.evicted_runs.append((entry.start, now))
            entry.start = None
        self._delete(entry)
        entry.attempt += 1
        entry.bound = set()
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
        self.pool.submit(self.writer.create, objects)

    def _delete(self, entry: LiveJob) -> None:
        """The pods of the job's current run, and their claims if it made any."""
        pods = entry.pods()
        self.deleting.update(pods)
        claims = self.style.resource(entry.job) is None
        self.pool.submit(self.writer.delete, self.namespace, pods, claims)

    def running(self) -> int:
        return sum(1 for e in self.live.values() if e.start is not None and e.end is None)

    def arrived_all(self) -> bool:
        return self.next_arrival == len(self.arrivals)

    def next_wake(self, now: float) -> float:
        wakes = [now + 1.0]
        if not self.arrived_all():
            wakes.append(self.wall(self.arrivals[self.next_arrival].job.arrival))
        if self.ends:
            wakes.append(self.ends[0][0])
        return min(wakes)


def replay_live(
    api: client.ApiClient,
    jobs: Sequence[Job],
    rack: RackSpec,
    racks: int,
    *,
    namespace: str,
    driver: str,
    speedup: float,
    gangs: bool = True,
    style: PodStyle = CLAIMS,
    idle_seconds: float = 330.0,
    failures: Failures | None = None,
    fault_targets: FaultTargets | None = None,
    progress: Callable[[str], None] = lambda _: None,
) -> LiveResult:
    """Replay `jobs` (their durations already for `rack`'s generation) on the
    cluster `api` reaches; every object goes into `namespace`, which is
    created and deleted here. `failures` need `fault_targets`."""
    if failures is not None and fault_targets is None:
        raise ValueError("fault_targets: failures need the simulator-control sockets to send to")
    apiserver = ApiServer(api.configuration, USER_AGENT, REQUEST_TIMEOUT)
    objects = Objects(apiserver)
    try:
        objects.create(NAMESPACES, {"metadata": {"name": namespace}})
    except ApiError as err:
        if err.status != 409:
            raise
        raise ValueError(
            f"--namespace: {namespace} exists (an earlier replay's, still being deleted?); "
            "wait until it is gone, or name another"
        ) from err
    pods = PodWatch(apiserver, namespace)
    pods.start()
    clock = FaultClock(failures) if failures is not None else None

    def send(failure: Failure, inject: bool) -> None:
        assert fault_targets is not None
        r, server, _ = failure.chip
        body = fault_request(failure, rack, fault_targets.nodes[r][server])
        set_fault(fault_targets.sockets[r], body, inject)

    with ThreadPoolExecutor(CREATORS) as pool:
        run = _LiveRun(
            objects,
            pool,
            jobs,
            rack,
            namespace=namespace,
            driver=driver,
            speedup=speedup,
            gangs=gangs,
            style=style,
        )
        last_progress = run.t0
        started = 0
        try:
            while True:
                now = time.monotonic()
                run.arrive(now)
                run.end_due(now)
                wake = run.next_wake(now)
                if clock is not None:
                    for action in clock.due(run.sim(now)):
                        pool.submit(send, action.failure, action.inject)
                    upcoming = clock.next_time()
                    if upcoming is not None:
                        wake = min(wake, run.wall(upcoming))
                if (
                    run.arrived_all()
                    and not run.running()
                    and (
                        all(e.end is not None for e in run.live.values())
                        or now - last_progress > idle_seconds
                    )
                ):
                    break
                try:
                    event = pods.events.get(timeout=max(0.0, wake - now))
                except queue.Empty:
                    continue
                if run.see(event):
                    last_progress = event.wall
                    now_started = sum(1 for e in run.live.values() if e.start is not None)
                    if now_started // 100 > started // 100:
                        progress(f"{now_started} of {len(run.live)} jobs running or ended")
                    started = now_started
        finally:
            pods.close()
            for failure in clock.outstanding() if clock is not None else []:
                pool.submit(send, failure, False)
    wall = time.monotonic() - run.t0
    progress(f"deleting namespace {namespace}")
    delete_namespace(objects, namespace)
    injected = clock.injected if clock is not None else []
    return LiveResult(
        _as_replay(
            run.live.values(),
            run.t0,
            speedup,
            rack,
            racks=racks,
            gangs=gangs,
            failures=len(injected),
        ),
        speedup,
        wall,
        [e.start - e.created for e in run.live.values() if e.start and e.created],
        list(injected),
    )


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
    t0: float,
    speedup: float,
    rack: RackSpec,
    *,
    racks: int,
    gangs: bool,
    failures: int,
) -> Replay:
    """The live run in the offline anchor's terms, in simulated seconds."""
    records: list[JobRecord] = []
    events: list[tuple[float, int, int, int]] = []

    def sim(wall: float) -> float:
        return (wall - t0) * speedup

    for e in entries:
        cores = e.job.cores(rack)
        start = sim(e.start) if e.start is not None else None
        end = sim(e.end) if e.end is not None and start is not None else None
        lost = sum(sim(evicted) - sim(began) for began, evicted in e.evicted_runs) * cores
        records.append(JobRecord(e.job, start, end, [], len(e.evicted_runs), lost))
        events.append((e.job.arrival, 0, 1, 0))
        for began, evicted in e.evicted_runs:
            events += [(sim(began), cores, -1, 1), (sim(evicted), -cores, 1, 2)]
        if start is not None:
            events.append((start, cores, -1, 1))
        if end is not None:
            events.append((end, -cores, 0, 2))
    samples: list[Sample] = []
    held = waiting = 0
    for when, cores, queued, _ in sorted(events, key=lambda x: (x[0], x[3])):
        held += cores
        waiting += queued
        samples.append(Sample(when, held, waiting, None))
    return Replay(rack, racks, "kube-scheduler", gangs, tuple(records), tuple(samples), failures)
