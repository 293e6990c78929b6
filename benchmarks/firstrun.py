"""What the first-run benchmarks (`make bench-first-demo`, `make
bench-first-test`) measure besides time, for the README's "what the machine
needs": the memory in use on the machine while the run lasts, and the disk
that the checkout and the caches a first run fills take."""

import argparse
import os
import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final

from benchmarks.report import (
    Conditions,
    PeriodicSampler,
    add_noisy_flag,
    make_command,
    write_results,
)

MEMORY_INTERVAL: Final = 2.0
"""Seconds between memory samples: a Go link's peak lasts only seconds."""
MIB: Final = 2**20


def meminfo_mib(meminfo: str) -> tuple[float, float]:
    """(MemTotal, MemTotal less MemAvailable) of a /proc/meminfo text in MiB:
    the machine's memory and what it could not hand to a new process without
    swapping."""
    kib = {
        name: int(value.split()[0])
        for name, _, value in (line.partition(":") for line in meminfo.splitlines())
        if value
    }
    return kib["MemTotal"] / 1024, (kib["MemTotal"] - kib["MemAvailable"]) / 1024


def machine_memory() -> tuple[float, float]:
    return meminfo_mib(Path("/proc/meminfo").read_text())


class MemorySampler(PeriodicSampler):
    """The machine's memory in use before the run and its peak while it lasts."""

    def __init__(self) -> None:
        super().__init__(MEMORY_INTERVAL)
        self.total_mib, self.before_mib = machine_memory()
        self.peak_mib = self.before_mib

    def sample(self) -> None:
        self.peak_mib = max(self.peak_mib, machine_memory()[1])

    def results(self) -> dict[str, Any]:
        return {
            "memory_total_mib": round(self.total_mib),
            "memory_in_use_before_mib": round(self.before_mib),
            "memory_in_use_peak_mib": round(self.peak_mib),
        }


def tree_mib(path: Path) -> float:
    """Disk blocks under `path` in MiB, a file linked twice counted once (the
    build links a binary built for one release into another's directory)."""
    seen: set[tuple[int, int]] = set()
    total = 0
    for folder, dirs, files in os.walk(path):
        for name in [*dirs, *files]:
            found = os.lstat(os.path.join(folder, name))
            if (found.st_dev, found.st_ino) not in seen:
                seen.add((found.st_dev, found.st_ino))
                total += found.st_blocks * 512
    return total / MIB


def first_run_dirs(env: Mapping[str, str], checkout: Path) -> dict[str, Path]:
    """Where a first run writes, for the user `env` belongs to: the checkout
    (its .venv and build/), the project's cache of built binaries and images,
    uv's cache of wheels and Go's caches of modules and builds."""
    home = Path(env["HOME"])
    cache = Path(env.get("XDG_CACHE_HOME") or home / ".cache")
    go = subprocess.run(
        ["go", "env", "GOMODCACHE", "GOCACHE"],
        env=dict(env),
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    return {
        "checkout": checkout,
        "trainium_dra_cache": Path(env.get("TRAINIUM_DRA_CACHE") or home / ".cache/trainium-dra"),
        "uv_cache": Path(env.get("UV_CACHE_DIR") or cache / "uv"),
        "go_module_cache": Path(go[0]),
        "go_build_cache": Path(go[1]),
    }


def disk_mib(dirs: Mapping[str, Path]) -> dict[str, int]:
    """Each directory's size now (0 for one that does not exist)."""
    return {name: round(tree_mib(path)) if path.exists() else 0 for name, path in dirs.items()}


def run_first(
    name: str,
    *,
    why_root: str,
    measure: Callable[[Path], Mapping[str, Any]],
    keys: tuple[str, str],
    description: str,
    argv: list[str] | None,
    section: Callable[[Mapping[str, Any]], str] | None = None,
) -> int:
    """The command line of a first-run benchmark `name` (`first-demo`,
    `first-test`): as root, `measure` into a fresh log, the results written
    with the run's conditions; `keys` are (seconds, passed) of the results.
    With `section`, the results are that section of the file (the others
    kept). Exit 0 only when the run it measured passed."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--log", type=Path, default=Path(f"/tmp/bench-{name}.log"))
    add_noisy_flag(parser)
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        raise SystemExit(f"bench-{name}: run as root; {why_root}")
    conditions = Conditions.begin(args.noisy)
    args.log.unlink(missing_ok=True)
    results = dict(measure(args.log))
    command = make_command(f"make bench-{name}", argv)
    out = write_results(
        name, command, results, conditions, section=section(results) if section else None
    )
    seconds, passed = keys
    print(f"bench-{name}: {results[seconds]} s, exit {results['exit_code']}; wrote {out}")
    return 0 if results[passed] else 1
