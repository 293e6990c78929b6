"""What the cluster spent on a live replay, read before and after it: the
CPU seconds of each of its processes (from /proc, by the pids the local
cluster recorded) and the kube-scheduler's attempts by result, with the
seconds they took (its /metrics). They say where the wall time of a replay
that fell behind went."""

import logging
from collections.abc import Mapping

import httpx
from prometheus_client.parser import text_string_to_metric_families

from driver.procstat import process_cpu_seconds

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
