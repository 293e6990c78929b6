"""The kube-scheduler built with the counters-first patch
(hack/k8s-counters-first; docs/scale.md, "Counters before selectors"): its
builder builds it once into the cache and prints its path every time."""

import subprocess
from pathlib import Path
from typing import Final

BUILDER: Final = Path(__file__).resolve().parents[1] / "hack" / "k8s-counters-first" / "build.sh"
NAME: Final = "counters-first"
"""The scheduler's name in benchmark arguments and results."""
ARM: Final = "node pools, counters-first scheduler"
"""The busy-fleet benchmark's arm: the node pools on this scheduler."""


def counters_first_scheduler() -> Path:
    """The patched kube-scheduler, built first when the cache has none (minutes)."""
    built = subprocess.run([str(BUILDER)], check=False, capture_output=True, text=True)
    if built.returncode != 0:
        raise RuntimeError(f"{BUILDER} failed (exit {built.returncode}):\n{built.stderr}")
    return Path(built.stdout.strip().splitlines()[-1])
