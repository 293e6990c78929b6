"""One node's simulated server and which claim owns each job.

Wraps `simdevice.server.ServerSim` (which follows its clock by itself) with a
lock, because gRPC, HTTP and the health loop call it from different threads,
and remembers which claim submitted each job.

Planning a job runs outside that lock, under a lock of its claim alone: a
first plan of a rack-wide shape is CPU time (much more on a host where
every node plans at once), and health checks, metrics and other claims must
not wait for it. The claim's own job list and release do wait, so a client
that repeats a timed-out start finds the job in progress instead of queueing
a second one, and an unprepare never leaves a job behind.
"""

import threading
from collections.abc import Mapping, Sequence
from typing import Any

from simdevice.faults import Fault
from simdevice.server import TERMINAL, JobInfo, ServerSim
from simdevice.telemetry import ChipHealth, ServerTelemetry
from simdevice.topology import RackSpec
from simdevice.workloads import parse_workload


class SimHost:
    def __init__(self, rack: RackSpec, server: int) -> None:
        self.sim = ServerSim(rack, server)
        self._lock = threading.Lock()
        self._owner: dict[str, str] = {}  # job id -> claim uid
        self._claim_locks: dict[str, threading.Lock] = {}
        # Set by a fault injected or cleared: the health loop checks at once
        # instead of at its next tick.
        self.faults_changed = threading.Event()

    def submit(
        self, claim_uid: str, spec: Mapping[str, Any], cores: Sequence[tuple[int, int]]
    ) -> JobInfo:
        """Parse `spec` (WorkloadError on bad input), plan it and run it on `cores`."""
        workload = parse_workload(spec)
        with self._claim_lock(claim_uid):
            timed = self.sim.plan_job(workload, cores)
            with self._lock:
                job_id = self.sim.queue(timed)
                self._owner[job_id] = claim_uid
                return self.sim.job(job_id)

    def jobs(self, claim_uid: str) -> list[JobInfo]:
        """The claim's jobs, once any submit of the claim in progress is queued."""
        with self._claim_lock(claim_uid), self._lock:
            return [j for j in self.sim.jobs() if self._owner.get(j.id) == claim_uid]

    def job(self, claim_uid: str, job_id: str) -> JobInfo | None:
        with self._lock:
            return self.sim.job(job_id) if self._owner.get(job_id) == claim_uid else None

    def cancel(self, claim_uid: str, job_id: str) -> JobInfo | None:
        with self._lock:
            return self.sim.cancel(job_id) if self._owner.get(job_id) == claim_uid else None

    def release(self, claim_uid: str) -> None:
        """Cancel the claim's unfinished jobs, including one being planned, and
        forget them (on unprepare)."""
        with self._claim_lock(claim_uid), self._lock:
            for job_id, owner in list(self._owner.items()):
                if owner != claim_uid:
                    continue
                if self.sim.job(job_id).state not in TERMINAL:
                    self.sim.cancel(job_id)
                del self._owner[job_id]
            self._claim_locks.pop(claim_uid, None)

    def telemetry(self) -> ServerTelemetry:
        with self._lock:
            return self.sim.telemetry()

    def chip_health(self) -> dict[int, ChipHealth]:
        with self._lock:
            return self.sim.chip_health()

    def health_by_place(self) -> dict[tuple[int, int | None], ChipHealth]:
        with self._lock:
            return self.sim.health_by_place()

    def inject(self, fault: Fault) -> None:
        with self._lock:
            self.sim.inject(fault)
        self.faults_changed.set()

    def clear(self, fault: Fault) -> None:
        with self._lock:
            self.sim.clear(fault)
        self.faults_changed.set()

    def _claim_lock(self, claim_uid: str) -> threading.Lock:
        with self._lock:
            return self._claim_locks.setdefault(claim_uid, threading.Lock())
