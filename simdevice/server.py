"""One simulated server (a node): its chips and cores, the jobs running on
them and the faults that stop them. Its counters and what it reports live
in `telemetry.py`, the health its faults leave in `faulthealth.py`.

Simulated time follows the clock: `advance(now)` runs the model up to `now`,
so a job lasts the time its plan says. Only the public entry points read the
clock; everything below them takes explicit times. A job progresses at the
rate of its plan, re-planned when the HBM bandwidth share of its chips changes
(several cores streaming at once); a hung core stalls its job.
"""

import itertools
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from simdevice.checks import NumericsResult, check, too_large
from simdevice.faulthealth import fault_health, summarize
from simdevice.faults import Fault, FaultError, FaultKind
from simdevice.sharing import fair_share
from simdevice.telemetry import ChipHealth, ServerCounters, ServerTelemetry
from simdevice.timing import core_dma_bandwidth, core_timing
from simdevice.topology import ChipPlace, RackSpec, chip_places
from simdevice.workloads import (
    Workload,
    WorkloadError,
    WorkloadTiming,
    core_shape,
    workload_timing,
)

JOB_STATES: tuple[str, ...] = ("queued", "running", "succeeded", "failed", "cancelled")
TERMINAL: frozenset[str] = frozenset({"succeeded", "failed", "cancelled"})
KEEP_FINISHED = 1000  # terminal jobs remembered per server


class JobNotFoundError(KeyError):
    """No job with that id on this server."""


@dataclass(frozen=True)
class JobInfo:
    id: str
    kind: str
    cores: tuple[tuple[int, int], ...]  # (local chip, physical core)
    state: str  # one of JOB_STATES
    progress: float  # 0..1
    submitted: float
    started: float | None
    finished: float | None
    error: str | None
    spec: dict[str, object]  # the workload, defaults filled in
    duration: float  # seconds the job takes at its current HBM share
    utilization: float  # the job's average BF16-equivalent FLOPs over BF16 peak
    # with "numerics": true, once succeeded: one core's result against float64
    numerics: dict[str, float | bool] | None = None


@dataclass(frozen=True)
class TimedJob:
    """A workload checked and timed on its cores, not queued yet. The first
    timing of a large shape costs CPU (much more on a host where every node times
    it at once), which is why `plan_job` and `queue` are two steps."""

    workload: Workload
    cores: tuple[tuple[int, int], ...]  # sorted (local chip, physical core)
    chips: frozenset[int]
    plan: WorkloadTiming
    numerics: NumericsResult | None


@dataclass
class _Job:
    id: str
    workload: Workload
    cores: tuple[tuple[int, int], ...]
    chips: frozenset[int]
    submitted: float
    plan: WorkloadTiming
    rows: npt.NDArray[np.intp]  # counter rows of its cores
    plans: dict[float | None, WorkloadTiming] = field(default_factory=dict)  # by HBM share
    numerics: NumericsResult | None = None
    state: str = "queued"
    done: float = 0.0
    started: float | None = None
    finished: float | None = None
    error: str | None = None

    @property
    def demand(self) -> float:
        """HBM bytes/s each of its cores moves when nothing else limits it."""
        free = self.plans[None]
        if free.duration <= 0:
            return 0.0
        return free.iterations * free.compute.dma_bytes / free.duration


class ServerSim:
    """The chips of server `server` of a rack of `spec`."""

    def __init__(
        self, spec: RackSpec, server: int, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if not 0 <= server < spec.servers:
            raise ValueError(f"server: must be in [0, {spec.servers}), got {server}")
        self.spec = spec
        self.server = server
        self._clock = clock
        self._now = clock()
        places = chip_places(spec)
        self.chips: list[ChipPlace] = [p for p in places if p.server == server]
        self._counters = ServerCounters(spec, server, self._now)
        # the running job of each (local chip, physical core)
        self._core_jobs: dict[tuple[int, int], str | None] = dict.fromkeys(self._counters.places)
        self._rate_key: tuple[tuple[str, float], ...] = ()
        # rates change only when jobs start or end or faults come and go
        self._rates_now: dict[str, tuple[float, WorkloadTiming]] | None = None
        self._jobs: dict[str, _Job] = {}
        self._queue: list[str] = []
        self._running: list[str] = []
        self._faults: set[Fault] = set()
        self._ids = itertools.count(1)
        self._peak = core_timing(spec.chip).peak_flops("bf16")
        self._core_dma = core_dma_bandwidth(spec.chip)

    def plan_job(self, workload: Workload, cores: Sequence[tuple[int, int]]) -> TimedJob:
        """Check `cores` ((local chip, physical core) pairs) and plan `workload`
        on them. Reads only the rack spec, never the clock or the jobs, so a
        caller can plan outside the lock it holds around the other entry points."""
        picked = self._check_cores(cores)
        chips = frozenset(c for c, _ in picked)
        job_plan = self._plan(workload, picked, chips, None)
        return TimedJob(workload, picked, chips, job_plan, _numerics(workload, len(picked)))

    # -- public entry points (read the clock) --------------------------------
    def submit(self, workload: Workload, cores: Sequence[tuple[int, int]]) -> str:
        """WorkloadTiming `workload` on `cores` and queue it; returns its id."""
        return self.queue(self.plan_job(workload, cores))

    def queue(self, timed: TimedJob) -> str:
        """Queue a timed job; returns its id. The clock is read after the
        plan, so the time spent planning never counts as the job's."""
        now = self._tick()
        rows = self._counters.rows(timed.cores)
        job = _Job(
            f"job-{next(self._ids)}",
            timed.workload,
            timed.cores,
            timed.chips,
            now,
            timed.plan,
            rows,
        )
        job.plans[None] = timed.plan
        job.numerics = timed.numerics
        self._jobs[job.id] = job
        self._queue.append(job.id)
        self._run_until(now)
        return job.id

    def job(self, job_id: str) -> JobInfo:
        self._tick()
        return self._info(self._get(job_id))

    def jobs(self) -> list[JobInfo]:
        self._tick()
        return [self._info(j) for j in self._jobs.values()]

    def cancel(self, job_id: str) -> JobInfo:
        now = self._tick()
        job = self._get(job_id)
        if job.state not in TERMINAL:
            self._finish(job, now, "cancelled", None)
            self._run_until(now)
        return self._info(job)

    def advance(self, now: float | None = None) -> None:
        """Run the model up to `now` (default: the clock)."""
        self._run_until(self._clock() if now is None else now)

    def inject(self, fault: Fault) -> None:
        now = self._tick()
        self._check_fault(fault)
        self._faults.add(fault)
        self._rates_now = None
        self._counters.fault_injected(fault)
        for job_id in list(self._running):
            job = self._jobs[job_id]
            reason = self._fault_fails(fault, job)
            if reason:
                self._finish(job, now, "failed", reason)
        self._run_until(now)

    def clear(self, fault: Fault) -> None:
        now = self._tick()
        self._check_fault(fault)
        self._faults.discard(fault)
        self._rates_now = None
        self._run_until(now)

    def chip_health(self) -> dict[int, ChipHealth]:
        self._tick()
        return {c: self._health(c) for c in range(self.spec.chips_per_server)}

    def health_by_place(self) -> dict[tuple[int, int | None], ChipHealth]:
        """Unhealthy places only: (chip, core) for a fault of one core, (chip,
        None) for one of the whole chip, so a bad core spares its neighbours."""
        self._tick()
        return fault_health(self._faults)

    def telemetry(self) -> ServerTelemetry:
        now = self._tick()
        running = [self._jobs[job_id] for job_id in self._running]
        return self._counters.report(
            now,
            [(job.cores, job.plan.hbm_bytes, job.plan.compute.sbuf_bytes) for job in running],
            self._core_jobs,
            self._hung_cores(),
            [self._health(c) for c in range(self.spec.chips_per_server)],
        )

    # -- the model (explicit times) ------------------------------------------
    def _tick(self) -> float:
        self._run_until(self._clock())
        return self._now

    def _run_until(self, now: float) -> None:
        """Start what can start, then move time forward job completion by job
        completion until `now`."""
        now = max(now, self._now)
        while True:
            self._start_queued()
            if self._rates_now is None:
                self._rates_now = self._rates()
            rates = self._rates_now
            ends = {}
            for job_id, (rate, _) in rates.items():
                if rate == math.inf:  # nothing to do: done as soon as it starts
                    ends[job_id] = self._now
                elif rate > 0:
                    ends[job_id] = self._now + (1.0 - self._jobs[job_id].done) / rate
            t_next = min([now, *ends.values()])
            self._accrue(rates, t_next - self._now)
            self._now = t_next
            finished = [j for j, end in ends.items() if end <= t_next]
            for job_id in finished:
                self._finish(self._jobs[job_id], self._now, "succeeded", None)
            if not finished and t_next >= now:
                return

    def _start_queued(self) -> None:
        """Jobs start in submission order per core: a job whose cores are free
        starts unless an earlier queued job is waiting for one of them."""
        waiting: set[tuple[int, int]] = set()
        for job_id in list(self._queue):
            job = self._jobs[job_id]
            free = all(self._core_jobs[p] is None for p in job.cores)
            if not free or waiting.intersection(job.cores):
                waiting.update(job.cores)
                continue
            self._queue.remove(job_id)
            reason = self._start_blocker(job)
            if reason:
                self._finish(job, self._now, "failed", reason)
                continue
            job.state, job.started = "running", self._now
            self._rates_now = None
            self._running.append(job_id)
            for p in job.cores:
                self._core_jobs[p] = job_id

    def _rates(self) -> dict[str, tuple[float, WorkloadTiming]]:
        """Progress per second of every running job under the current HBM shares."""
        hung = self._hung_cores()
        stalled = {j for j in self._running if hung.intersection(self._jobs[j].cores)}
        demands: dict[int, list[float]] = {}
        for job_id in self._running:
            if job_id in stalled:
                continue
            job = self._jobs[job_id]
            for c, _ in job.cores:
                demands.setdefault(c, []).append(job.demand)
        hbm = self.spec.chip.hbm_bandwidth
        caps = {chip: fair_share(d, hbm) for chip, d in demands.items()}
        rates = {}
        for job_id in self._running:
            job = self._jobs[job_id]
            if job_id in stalled:
                rates[job_id] = (0.0, job.plan)
                continue
            chip_caps = [cap for chip in job.chips if (cap := caps[chip]) is not None]
            cap = min(chip_caps) if chip_caps else None
            # a core that wants less than the cap is served in full
            capped = cap is not None and job.demand > cap and cap < self._core_dma
            share = cap if capped else None
            if share not in job.plans:
                job.plans[share] = self._plan(job.workload, job.cores, job.chips, share)
            job.plan = job.plans[share]
            duration = job.plan.duration
            rates[job_id] = (1.0 / duration if duration > 0 else math.inf, job.plan)
        return rates

    def _accrue(self, rates: dict[str, tuple[float, WorkloadTiming]], dt: float) -> None:
        """Move progress over `dt` seconds; the counters only when rates change."""
        key = tuple((job_id, rate) for job_id, (rate, _) in rates.items())
        if key != self._rate_key:
            running = [
                (self._jobs[job_id].rows, rate * job_plan.iterations, job_plan.compute)
                for job_id, (rate, job_plan) in rates.items()
                if 0 < rate < math.inf
            ]
            self._counters.set_rates(running, self._peak, self._now)
            self._rate_key = key
        if dt <= 0:
            return
        for job_id, (rate, job_plan) in rates.items():
            if rate == math.inf:
                continue
            job = self._jobs[job_id]
            job.done = min(1.0, job.done + rate * dt)
            if rate > 0 and job_plan.comm_bytes:
                sent = rate * dt * job_plan.iterations * job_plan.comm_bytes
                self._counters.link_sent(job.chips, sent)

    def _finish(self, job: _Job, now: float, state: str, error: str | None) -> None:
        self._rates_now = None
        if job.id in self._queue:
            self._queue.remove(job.id)
        if job.id in self._running:
            self._running.remove(job.id)
            for p in job.cores:
                self._core_jobs[p] = None
        job.state, job.finished, job.error = state, now, error
        if state == "succeeded":
            job.done = 1.0
        self._counters.job_finished(job.cores, state, now - job.submitted)
        self._forget_old_jobs()

    def _forget_old_jobs(self) -> None:
        terminal = [j for j, job in self._jobs.items() if job.state in TERMINAL]
        for job_id in terminal[: max(0, len(terminal) - KEEP_FINISHED)]:
            del self._jobs[job_id]

    # -- helpers ---------------------------------------------------------------
    def _plan(
        self,
        workload: Workload,
        cores: tuple[tuple[int, int], ...],
        chips: frozenset[int],
        share: float | None,
    ) -> WorkloadTiming:
        return workload_timing(workload, self.spec, len(cores), len(chips), share)

    def _check_cores(self, cores: Sequence[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
        picked = []
        for entry in cores:
            if (
                not isinstance(entry, tuple | list)
                or len(entry) != 2
                or not all(isinstance(x, int) and not isinstance(x, bool) for x in entry)
            ):
                raise WorkloadError(f"cores: {entry!r} is not a (chip, core) pair of integers")
            chip, core = int(entry[0]), int(entry[1])
            if not 0 <= chip < self.spec.chips_per_server:
                last = self.spec.chips_per_server - 1
                raise WorkloadError(f"cores: chip {chip} is not on this server (0..{last})")
            if not 0 <= core < self.spec.chip.cores:
                raise WorkloadError(
                    f"cores: core {core} is not on a chip (0..{self.spec.chip.cores - 1})"
                )
            picked.append((chip, core))
        if not picked:
            raise WorkloadError("cores: give at least one (chip, core) pair")
        if len(set(picked)) != len(picked):
            raise WorkloadError("cores: a core is listed twice")
        return tuple(sorted(picked))

    def _check_fault(self, fault: Fault) -> None:
        if not 0 <= fault.chip < self.spec.chips_per_server:
            raise FaultError(
                f"chip: {fault.chip} is not on this server (0..{self.spec.chips_per_server - 1})"
            )
        if fault.core is not None and not 0 <= fault.core < self.spec.chip.cores:
            raise FaultError(f"core: {fault.core} is not on a chip (0..{self.spec.chip.cores - 1})")

    def _get(self, job_id: str) -> _Job:
        job = self._jobs.get(job_id)
        if job is None:
            raise JobNotFoundError(job_id)
        return job

    def _hung_cores(self) -> set[tuple[int, int]]:
        return {
            (f.chip, f.core)
            for f in self._faults
            if f.kind == FaultKind.CORE_HANG and f.core is not None
        }

    @staticmethod
    def _fault_fails(fault: Fault, job: _Job) -> str | None:
        """Why `fault` fails running `job`, if it does."""
        if fault.chip not in job.chips:
            return None
        if fault.kind == FaultKind.ECC_UNCORRECTED_HBM:
            return f"uncorrected HBM ECC error on chip {fault.chip}"
        if fault.kind == FaultKind.ECC_UNCORRECTED_SRAM and (
            fault.core is None or (fault.chip, fault.core) in job.cores
        ):
            where = "" if fault.core is None else f" core {fault.core}"
            return f"uncorrected SRAM ECC error on chip {fault.chip}{where}"
        if fault.kind == FaultKind.LINK_DOWN and job.workload.communicates:
            return f"NeuronLink down on chip {fault.chip}"
        return None

    def _start_blocker(self, job: _Job) -> str | None:
        """A fault that makes `job` fail as soon as it starts."""
        for fault in sorted(self._faults, key=lambda f: (f.chip, f.kind.value, f.core or 0)):
            if fault.uncorrected and fault.chip in job.chips:
                return f"chip {fault.chip} has failed: {self._health(fault.chip).reason}"
            if fault.kind == FaultKind.LINK_DOWN:
                reason = self._fault_fails(fault, job)
                if reason:
                    return reason
        return None

    def _health(self, chip: int) -> ChipHealth:
        return summarize([f for f in self._faults if f.chip == chip])

    def _info(self, job: _Job) -> JobInfo:
        compute = job.plan.compute
        duration = job.plan.duration
        util = (
            job.plan.iterations * compute.flops / (self._peak * duration) if duration > 0 else 0.0
        )
        return JobInfo(
            id=job.id,
            kind=job.workload.kind,
            cores=job.cores,
            state=job.state,
            progress=job.done,
            submitted=job.submitted,
            started=job.started,
            finished=job.finished,
            error=job.error,
            spec=job.workload.spec(),
            duration=duration,
            utilization=util,
            numerics=job.numerics.as_dict()
            if job.numerics is not None and job.state == "succeeded"
            else None,
        )


def _numerics(workload: Workload, cores: int) -> NumericsResult | None:
    """Run the data path of one core's share when the workload asks for it."""
    params = dict(workload.params)
    if not params.get("numerics"):
        return None
    shape = core_shape(workload, cores)
    reason = too_large(workload.kind, shape)
    if reason:
        raise WorkloadError(f"numerics: the data path takes {reason}; turn numerics off")
    shape.pop("heads", None)
    return check(
        workload.kind,
        shape,
        params["dtype"],
        sparsity=params.get("sparsity", "dense"),
        func=params.get("func", "gelu"),
    )
