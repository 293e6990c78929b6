"""What every benchmark shares on the measuring side: the machine, its load
around the run and the commit and release it ran, the refusal to measure on a
busy machine, interleaved repetitions, and writing the results file, after
which the pages are rendered from the results files alone
(benchmarks/render.py)."""

import argparse
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Self, TypeVar

from benchmarks import render
from benchmarks.conditions import is_noisy
from benchmarks.paths import RESULTS_DIR, ROOT
from localsim.controlplane.binaries import k8s_version

REPEATS: Final = 3
"""Interleaved repetitions behind every timed figure; the page shows their median
and their spread."""

T = TypeVar("T")
LOAD_INTERVAL: Final = 10.0
"""Seconds between samples of the load average during a run."""


def machine() -> dict[str, Any]:
    """What the figures were measured on."""
    return {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "date": time.strftime("%Y-%m-%d"),
    }


def add_noisy_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--noisy",
        action="store_true",
        help="measure even when the load average exceeds the CPU count; the page "
        "then marks the figures as noisy",
    )


def add_out_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--out",
        type=Path,
        help="write the results to this file only, not to benchmarks/results/ and the "
        "pages: for trying the benchmark on a busy machine",
    )


def _payload(
    name: str, command: str, results: dict[str, Any], conditions: "Conditions"
) -> dict[str, Any]:
    """A results file's content: what ran, on what machine, under which conditions."""
    return {
        "benchmark": name,
        "command": command,
        "machine": machine(),
        "conditions": conditions.end(),
        "results": results,
    }


def write_trial(
    out: Path, name: str, command: str, results: dict[str, Any], conditions: "Conditions"
) -> Path:
    """A trial run's results, as a results file holds them, into `out` alone:
    benchmarks/results/ and the pages stay as they are."""
    payload = _payload(name, command, results, conditions)
    out.write_text(json.dumps(payload, indent=2, sort_keys=True) + "\n")
    return out


def admit(load: float, cpus: int, noisy: bool) -> None:
    """Refuse to start at a 1-minute load above the CPU count (more runnable
    work than CPUs: timings would measure the queue) unless `noisy` (the
    `--noisy` flag) says to go on; the page then marks the run as noisy."""
    if is_noisy({"cpus": cpus, "load_1min_before": load}) and not noisy:
        raise SystemExit(
            f"load average {load:.1f} exceeds the {cpus} CPUs: figures measured now "
            "would be noise. Wait for a quiet machine, or pass --noisy (BENCH_ARGS=--noisy "
            "through make) to measure anyway with the page marking the run as noisy."
        )


def git_state() -> dict[str, Any]:
    """The commit checked out, and whether tracked files differed from it:
    which code a run measured."""

    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True)
        return done.stdout.strip()

    return {
        "git_commit": git("rev-parse", "HEAD"),
        "git_dirty": bool(git("status", "--porcelain", "--untracked-files=no")),
    }


class PeriodicSampler(ABC):
    """Calls `sample` every `interval` seconds on a thread while the run
    lasts (a `with` block, or `start` and `close`)."""

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    @abstractmethod
    def sample(self) -> None:
        """Take one reading."""

    def run(self) -> None:
        while not self.stop.wait(self.interval):
            self.sample()

    def __enter__(self) -> Self:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop.set()
        self.thread.join()


class LoadSampler(PeriodicSampler):
    """The 1-minute load average every LOAD_INTERVAL seconds while the run
    lasts: a quiet start says nothing about a long run."""

    def __init__(self) -> None:
        super().__init__(LOAD_INTERVAL)
        self.samples: list[float] = []

    def sample(self) -> None:
        self.samples.append(round(os.getloadavg()[0], 2))


@dataclass
class Conditions:
    """The machine's CPU count and 1-minute load average around one run (and
    sampled during it), the Kubernetes release it ran on and the commit it
    ran from."""

    cpus: int
    load_before: float
    kubernetes: str | None
    git: dict[str, Any]
    sampler: LoadSampler = field(default_factory=LoadSampler)

    @classmethod
    def begin(cls, noisy: bool, kubernetes: bool = True) -> "Conditions":
        """Read the load and the checkout before the run (a run that writes its
        results as it goes changes the tree itself); refuse to start on a busy
        machine unless `noisy` (the `--noisy` flag) says to go on.
        `kubernetes`: False for a run that starts no Kubernetes component."""
        cpus, load = os.cpu_count() or 1, os.getloadavg()[0]
        admit(load, cpus, noisy)
        found = cls(cpus, load, k8s_version() if kubernetes else None, git_state())
        found.sampler.thread.start()
        return found

    def end(self) -> dict[str, Any]:
        """The conditions as the results file records them, load read now,
        with whether they make the run noisy."""
        during = self.sampler.samples
        recorded: dict[str, Any] = {
            "cpus": self.cpus,
            "kubernetes_version": self.kubernetes,
            **self.git,
            "load_1min_before": round(self.load_before, 2),
            "load_during_1min": {
                "samples": len(during),
                "max": max(during, default=None),
                "mean": round(statistics.fmean(during), 2) if during else None,
            },
            "load_1min_after": round(os.getloadavg()[0], 2),
        }
        return {**recorded, "noisy": is_noisy(recorded)}


def interleaved(runs: Mapping[str, Callable[[], T]], repeats: int = REPEATS) -> dict[str, list[T]]:
    """Each run `repeats` times, round by round (a, b, a, b, ...), so slow drift
    of the machine falls on every run alike."""
    out: dict[str, list[T]] = {name: [] for name in runs}
    for _ in range(repeats):
        for name, run in runs.items():
            out[name].append(run())
    return out


def last_results(name: str) -> dict[str, Any]:
    """The results benchmarks/results/<name>.json holds ({} when none)."""
    path = RESULTS_DIR / f"{name}.json"
    if not path.exists():
        return {}
    found: dict[str, Any] = json.loads(path.read_text())["results"]
    return found


def write_results(
    name: str,
    command: str,
    results: dict[str, Any],
    conditions: Conditions,
    *,
    merge: bool = False,
    section: str | None = None,
    keep_header: bool = False,
) -> Path:
    """Store `results` as benchmarks/results/<name>.json, then render every page
    from the results files. With `merge`, over the last run's results one level
    deep (a dict is merged key by key), so a run of some steps or cases keeps
    the figures of the others. With `section`, as that section of a file whose
    sections run apart (chaos): each keeps its own command and load. With
    `keep_header` (and `merge`), the file keeps the last run's command, machine
    and load: the results added carry their own."""
    out = RESULTS_DIR / f"{name}.json"
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    if section is not None:
        data: dict[str, Any] = json.loads(out.read_text()) if out.exists() else {"benchmark": name}
        data.setdefault("results", {})[section] = results
        data.setdefault("commands", {})[section] = command
        data.setdefault("conditions", {})[section] = conditions.end()
        data["machine"] = machine()
        out.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
        render.write_pages()
        return out
    if merge:
        last = last_results(name)
        for key, value in results.items():
            last[key] = {**last.get(key, {}), **value} if isinstance(value, dict) else value
        results = last
    payload = _payload(name, command, results, conditions)
    if keep_header and out.exists():
        last_payload = json.loads(out.read_text())
        for key in ("command", "machine", "conditions"):
            if key in last_payload:
                payload[key] = last_payload[key]
            else:
                payload.pop(key)
    out.write_text(json.dumps(payload, indent=2, sort_keys=True) + "\n")
    render.write_pages()
    return out


def make_command(target: str, argv: list[str] | None) -> str:
    """The make command that ran (`target`, e.g. `make bench-storage`), with the
    arguments the benchmark was given."""
    given = sys.argv[1:] if argv is None else argv
    return f"{target} BENCH_ARGS={shlex.quote(' '.join(given))}" if given else target
