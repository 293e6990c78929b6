"""The one rule that calls a run noisy, read from the conditions its results
file records (benchmarks/report.py writes them): the benchmark that records
them and every page that shows them decide alike."""

from collections.abc import Mapping
from typing import Any


def load_readings(conditions: Mapping[str, Any]) -> list[float]:
    """Every 1-minute load average the run recorded: before it, the largest
    sampled during it (where it was sampled) and after it."""
    during = (conditions.get("load_during_1min") or {}).get("max")
    found = (conditions.get("load_1min_before"), during, conditions.get("load_1min_after"))
    return [float(load) for load in found if load is not None]


def is_noisy(conditions: Mapping[str, Any]) -> bool:
    """Whether the load exceeded the CPU count at any reading: more runnable
    work than CPUs, so the run's times include waiting for one. A quiet start
    says nothing of a long run, nor a quiet end of its middle."""
    return any(load > conditions["cpus"] for load in load_readings(conditions))
