"""What the cluster spent on a live replay, read before and after it: the
CPU seconds of each of its processes (from /proc, by the pids the local
cluster recorded) and the kube-scheduler's attempts by result, with the
seconds they took (its /metrics). They say where the wall time of a replay
went. And what the settle clock reads after each event: whether the
scheduler and the driver's controller still have work (`WorkState`)."""

import logging
from collections.abc import Mapping
from dataclasses import dataclass, replace

import httpx
from prometheus_client.parser import text_string_to_metric_families

from driver.procstat import process_cpu_seconds
from whatif.settlecost import SettleCosts

log = logging.getLogger(__name__)
ATTEMPTS = "scheduler_schedule_attempts"
ATTEMPT_SECONDS = "scheduler_scheduling_attempt_duration_seconds"


def cpu_seconds(pids: Mapping[str, int]) -> dict[str, float]:
    """User + system CPU seconds of each named process still alive."""
    out = {}
    for name, pid in pids.items():
        try:
            out[name] = process_cpu_seconds(pid)
        except OSError:
            continue
    return out


def attempts_by_result(text: str) -> dict[str, dict[str, float]]:
    """result -> {"attempts": n, "seconds": s} summed over profiles, from a
    kube-scheduler /metrics text."""
    out: dict[str, dict[str, float]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            result = sample.labels.get("result")
            if result is None:
                continue
            if sample.name == f"{ATTEMPTS}_total":
                key = "attempts"
            elif sample.name == f"{ATTEMPT_SECONDS}_sum":
                key = "seconds"
            else:
                continue
            entry = out.setdefault(result, {"attempts": 0.0, "seconds": 0.0})
            entry[key] += sample.value
    return out


def scheduler_attempts(url: str, token: str) -> dict[str, dict[str, float]]:
    """The scheduler's attempts now; empty (and logged) if it cannot be read."""
    try:
        # The local scheduler's certificate is self-signed, and it listens on loopback.
        response = httpx.get(url, headers={"Authorization": token}, verify=False, timeout=10.0)
        response.raise_for_status()
    except httpx.HTTPError as err:
        log.warning("scheduler metrics at %s: %s", url, err)
        return {}
    return attempts_by_result(response.text)


def cpu_spent(before: Mapping[str, float], after: Mapping[str, float]) -> dict[str, float]:
    """CPU seconds each process used in between, most first."""
    used = {name: round(now - before.get(name, 0.0), 1) for name, now in after.items()}
    return dict(sorted(used.items(), key=lambda kv: -kv[1]))


def attempts_spent(
    before: Mapping[str, Mapping[str, float]], after: Mapping[str, Mapping[str, float]]
) -> dict[str, dict[str, float]]:
    """The scheduler's attempts and their seconds in between, by result."""
    out = {}
    for result, now in after.items():
        was = before.get(result, {})
        out[result] = {key: round(value - was.get(key, 0.0), 2) for key, value in now.items()}
    return out


PENDING = "scheduler_pending_pods{"
CACHE = "scheduler_cache_size{"
PROGRESS = (f"{ATTEMPTS}_total{{", "scheduler_event_handling_duration_seconds_count{")
IN_FLIGHT = (
    'scheduler_inflight_events{event="PodPopped"}',
    'scheduler_goroutines{operation="binding"}',
)
CONTROLLER_PENDING = "trainium_dra_controller_pending_work "
CONTROLLER_RECONCILES = "trainium_dra_controller_reconciles_total{"


@dataclass(frozen=True)
class WorkState:
    """What the settle clock needs of the cluster's deciders: pods the
    scheduler has to try now (active queue) or after a backoff, pods it has
    popped and not yet placed or given up, or assumed and is still binding
    (`binding`), work the driver's controller has queued or in hand, a count
    that grows with every attempt and every event the scheduler handles, its
    failed attempts, and the controller's reconciles."""

    active: int
    backoff: int
    binding: int
    controller: int
    progress: float
    failed: float
    reconciled: float = 0.0

    def busy(self, controller: bool) -> bool:
        """Work in hand for the scheduler, or with `controller` for either."""
        return bool(self.active or self.binding or (controller and self.controller))


def _value(line: str) -> float:
    return float(line.rsplit(" ", 1)[1])


def scheduler_work(text: str) -> WorkState:
    """From a kube-scheduler /metrics text, by line prefix: the full parser
    takes tens of milliseconds, and the clock reads this after every event."""
    queues = {"active": 0, "backoff": 0}
    binding = 0
    progress = failed = 0.0
    for line in text.splitlines():
        if line.startswith(PENDING):
            for queue in queues:
                if f'queue="{queue}"' in line:
                    queues[queue] += int(_value(line))
        elif line.startswith(CACHE):
            if 'type="assumed_pods"' in line:
                binding += int(_value(line))
        elif line.startswith(IN_FLIGHT):
            binding += int(_value(line))
        elif line.startswith(PROGRESS):
            progress += _value(line)
            if 'result="unschedulable"' in line:
                failed += _value(line)
    return WorkState(queues["active"], queues["backoff"], binding, 0, progress, failed)


def controller_work(text: str) -> tuple[int, float]:
    """The controller's pending work (0 if absent) and its reconciles so far,
    from its /metrics text."""
    pending, reconciled = 0, 0.0
    for line in text.splitlines():
        if line.startswith(CONTROLLER_PENDING):
            pending = int(_value(line))
        elif line.startswith(CONTROLLER_RECONCILES):
            reconciled += _value(line)
    return pending, reconciled


class WorkMetrics:
    """Reads the scheduler's /metrics, and the controller's when given, over
    kept-alive connections; each read counted in `costs`."""

    def __init__(
        self, scheduler: str, token: str, controller: str | None, costs: SettleCosts
    ) -> None:
        self.scheduler, self.controller, self.costs = scheduler, controller, costs
        # The local scheduler's certificate is self-signed, and it listens on loopback.
        self.http = httpx.Client(headers={"Authorization": token}, verify=False, timeout=10.0)
        self.plain = httpx.Client(timeout=10.0)

    def state(self, controller: bool) -> WorkState:
        """The scheduler's state, with the controller's when `controller`
        (and its /metrics were given); else the controller's fields are 0."""
        with self.costs.part("metrics"):
            response = self.http.get(self.scheduler)
            response.raise_for_status()
            self.costs.read(len(response.content))
            state = scheduler_work(response.text)
            if self.controller is None or not controller:
                return state
            answer = self.plain.get(self.controller)
            answer.raise_for_status()
            self.costs.read(len(answer.content))
            pending, reconciled = controller_work(answer.text)
            return replace(state, controller=pending, reconciled=reconciled)

    def close(self) -> None:
        self.http.close()
        self.plain.close()
