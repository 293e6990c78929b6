"""One node's simulated server and which claim owns each job.

Wraps `simdevice.server.ServerSim` (which follows its clock by itself) with a
lock, because gRPC, HTTP and the health loop call it from different threads,
and remembers which claim submitted each job.
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
        # Set by a fault injected or cleared: the health loop checks at once
        # instead of at its next tick.
        self.faults_changed = threading.Event()

    def submit(
        self, claim_uid: str, spec: Mapping[str, Any], cores: Sequence[tuple[int, int]]
    ) -> JobInfo:
        """Parse `spec` (WorkloadError on bad input) and run it on `cores`."""
        workload = parse_workload(spec)
        with self._lock:
            job_id = self.sim.submit(workload, cores)
            self._owner[job_id] = claim_uid
            return self.sim.job(job_id)

    def jobs(self, claim_uid: str) -> list[JobInfo]:
        with self._lock:
            return [j for j in self.sim.jobs() if self._owner.get(j.id) == claim_uid]

    def job(self, claim_uid: str, job_id: str) -> JobInfo | None:
        with self._lock:
            return self.sim.job(job_id) if self._owner.get(job_id) == claim_uid else None

    def cancel(self, claim_uid: str, job_id: str) -> JobInfo | None:
        with self._lock:
            return self.sim.cancel(job_id) if self._owner.get(job_id) == claim_uid else None

    def release(self, claim_uid: str) -> None:
        """Cancel the claim's unfinished jobs and forget them (on unprepare)."""
        with self._lock:
            for job_id, owner in list(self._owner.items()):
                if owner != claim_uid:
                    continue
                if self.sim.job(job_id).state not in TERMINAL:
                    self.sim.cancel(job_id)
                del self._owner[job_id]

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
