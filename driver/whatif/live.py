"""The replay through the real scheduler: a trace's jobs created on a running
local cluster on a compressed clock, placed by the real kube-scheduler on the
driver's published devices, each ended by deleting its pods once its pods
have held their devices for its duration.

Simulated time is wall time since the start times the speed-up. A job starts
when the last of its pods is bound (its claims are allocated then); its
queueing delay therefore includes the scheduler's own latency, times the
speed-up. Jobs still unbound when nothing has bound for `idle_seconds` and
no arrival is left are reported as never run."""

import heapq
import logging
import queue
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from driver.jsontypes import JSON
from driver.whatif.jobs import Job
from driver.whatif.objects import JOB_LABEL, job_objects, pod_name
from driver.whatif.offline import JobRecord, Replay, Sample
from simdevice.topology import RackSpec

log = logging.getLogger(__name__)
CREATORS = 4
WATCH_SECONDS = 60


@dataclass
class LiveJob:
    job: Job
    created: float | None = None
    bound: set[str] = field(default_factory=set)
    start: float | None = None
    end: float | None = None


class BindingWatch:
    """Wall times at which the namespace's replay pods were first seen bound."""

    def __init__(self, api: client.ApiClient, namespace: str) -> None:
        self.core = client.CoreV1Api(client.ApiClient(api.configuration))  # its own connections
        self.namespace = namespace
        self.events: queue.Queue[tuple[float, str, str]] = queue.Queue()
        self.stop = threading.Event()
        self.seen: set[str] = set()
        self.thread = threading.Thread(target=self._run, name="whatif-binds", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def close(self) -> None:
        self.stop.set()

    def _see(self, pod: Any) -> None:
        name = pod.metadata.name
        if pod.spec.node_name and name not in self.seen:
            self.seen.add(name)
            self.events.put((time.monotonic(), pod.metadata.labels[JOB_LABEL], name))

    def _run(self) -> None:
        version = None
        while not self.stop.is_set():
            try:
                if version is None:
                    listed = self.core.list_namespaced_pod(self.namespace, label_selector=JOB_LABEL)
                    for pod in listed.items:
                        self._see(pod)
                    version = listed.metadata.resource_version
                for event in watch.Watch().stream(
                    self.core.list_namespaced_pod,
                    self.namespace,
                    label_selector=JOB_LABEL,
                    resource_version=version,
                    timeout_seconds=WATCH_SECONDS,
                ):
                    version = event["object"].metadata.resource_version
                    self._see(event["object"])
                    if self.stop.is_set():
                        return
            except ApiException as err:
                if err.status != 410:
                    log.warning("pod watch: %s", err.reason)
                    time.sleep(1)
                version = None


@dataclass(frozen=True)
class LiveResult:
    replay: Replay
    speedup: float
    wall_seconds: float
    bind_latency_s: list[float]
    """Wall seconds from a job's creation to its last pod's binding."""


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
    idle_seconds: float = 330.0,
    progress: Callable[[str], None] = lambda _: None,
) -> LiveResult:
    """Replay `jobs` (their durations already for `rack`'s generation) on the
    cluster `api` reaches; every object goes into `namespace`, which is
    created and deleted here."""
    core = client.CoreV1Api(api)
    core.create_namespace({"metadata": {"name": namespace}})
    binds = BindingWatch(api, namespace)
    binds.start()
    writer = Writer(api)
    live = {j.name: LiveJob(j) for j in sorted(jobs, key=lambda j: (j.arrival, j.name))}
    arrivals = list(live.values())
    ends: list[tuple[float, str]] = []
    t0 = time.monotonic()
    last_progress = t0
    with ThreadPoolExecutor(CREATORS) as pool:
        try:
            next_arrival = 0
            while True:
                now = time.monotonic()
                while next_arrival < len(arrivals) and (
                    t0 + arrivals[next_arrival].job.arrival / speedup <= now
                ):
                    entry = arrivals[next_arrival]
                    entry.created = now
                    pool.submit(writer.create, job_objects(entry.job, namespace, driver, gangs))
                    next_arrival += 1
                while ends and ends[0][0] <= now:
                    _, name = heapq.heappop(ends)
                    live[name].end = now
                    pool.submit(writer.delete, namespace, live[name].job)
                running = sum(1 for e in live.values() if e.start is not None and e.end is None)
                if (
                    next_arrival == len(arrivals)
                    and not running
                    and (
                        all(e.end is not None for e in live.values())
                        or now - last_progress > idle_seconds
                    )
                ):
                    break
                wake = min(
                    t0 + arrivals[next_arrival].job.arrival / speedup
                    if next_arrival < len(arrivals)
                    else now + 1.0,
                    ends[0][0] if ends else now + 1.0,
                )
                try:
                    when, job_name, name = binds.events.get(timeout=max(0.0, wake - now))
                except queue.Empty:
                    continue
                last_progress = when
                entry = live[job_name]
                entry.bound.add(name)
                if len(entry.bound) == entry.job.pods and entry.start is None:
                    entry.start = when
                    heapq.heappush(ends, (when + entry.job.duration / speedup, job_name))
                    done = sum(1 for e in live.values() if e.start is not None)
                    if done % 100 == 0:
                        progress(f"{done} of {len(live)} jobs started")
        finally:
            binds.close()
    wall = time.monotonic() - t0
    core.delete_namespace(namespace, grace_period_seconds=0)
    return LiveResult(
        _as_replay(live.values(), t0, speedup, rack, racks=racks, gangs=gangs),
        speedup,
        wall,
        [e.start - e.created for e in live.values() if e.start and e.created],
    )


class Writer:
    """Creates and deletes the replay's objects from a few threads, each with an
    API client of its own (one client's connections shared by threads break),
    retrying a call that fails and logging one that keeps failing."""

    ATTEMPTS = 5

    def __init__(self, api: client.ApiClient) -> None:
        self.configuration = api.configuration
        self.local = threading.local()

    def _api(self) -> client.ApiClient:
        if not hasattr(self.local, "api"):
            self.local.api = client.ApiClient(self.configuration)
        api: client.ApiClient = self.local.api
        return api

    def _retry(self, what: str, call: Callable[[client.ApiClient], object]) -> None:
        for attempt in range(self.ATTEMPTS):
            try:
                call(self._api())
                return
            except ApiException as err:
                if err.status in (404, 409):
                    return
                failure = f"{err.status} {err.reason}"
            except Exception as err:  # a broken connection: a new client, then again
                failure = repr(err)
                self.local.__dict__.pop("api", None)
            time.sleep(0.2 * (attempt + 1))
        log.warning("%s: failed %d times, last: %s", what, self.ATTEMPTS, failure)

    def create(self, objects: list[JSON]) -> None:
        for obj in objects:
            self._retry(f"create {obj['kind']} {obj['metadata']['name']}", partial(_post, obj=obj))

    def delete(self, namespace: str, job: Job) -> None:
        """The job's pods (at once: the kubelet unprepares) and their claims."""
        for i in range(job.pods):
            name = pod_name(job, i)
            where = {"name": name, "namespace": namespace}
            self._retry(f"delete pod {namespace}/{name}", partial(_delete_pod, **where))
            self._retry(f"delete claim {namespace}/{name}", partial(_delete_claim, **where))


def _delete_pod(api: client.ApiClient, name: str, namespace: str) -> None:
    client.CoreV1Api(api).delete_namespaced_pod(name, namespace, grace_period_seconds=0)


def _delete_claim(api: client.ApiClient, name: str, namespace: str) -> None:
    client.CustomObjectsApi(api).delete_namespaced_custom_object(
        "resource.k8s.io", "v1", namespace, "resourceclaims", name
    )


def _post(api: client.ApiClient, obj: JSON) -> None:
    ns = obj["metadata"]["namespace"]
    if obj["kind"] == "Pod":
        client.CoreV1Api(api).create_namespaced_pod(ns, obj)
        return
    group, version = obj["apiVersion"].split("/")
    plural = {"ResourceClaim": "resourceclaims", "PodGroup": "podgroups"}[obj["kind"]]
    client.CustomObjectsApi(api).create_namespaced_custom_object(group, version, ns, plural, obj)


def _as_replay(
    entries: Iterable[LiveJob],
    t0: float,
    speedup: float,
    rack: RackSpec,
    *,
    racks: int,
    gangs: bool,
) -> Replay:
    """The live run in the offline anchor's terms, in simulated seconds."""
    records: list[JobRecord] = []
    events: list[tuple[float, int, int, int]] = []
    for e in entries:
        start = (e.start - t0) * speedup if e.start is not None else None
        end = (e.end - t0) * speedup if e.end is not None and start is not None else None
        records.append(JobRecord(e.job, start, end))
        events.append((e.job.arrival, 0, 1, 0))
        if start is not None:
            events.append((start, e.job.cores(rack), -1, 1))
        if end is not None:
            events.append((end, -e.job.cores(rack), 0, 2))
    samples: list[Sample] = []
    held = waiting = 0
    for when, cores, queued, _ in sorted(events, key=lambda x: (x[0], x[3])):
        held += cores
        waiting += queued
        samples.append(Sample(when, held, waiting, None))
    return Replay(rack, racks, "kube-scheduler", gangs, tuple(records), tuple(samples))
