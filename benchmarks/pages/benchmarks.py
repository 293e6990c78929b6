"""docs/benchmarks.md: how the pages are made, then one section per
benchmark results file, in a fixed order."""

from collections.abc import Callable, Mapping
from typing import Any, Final

from benchmarks.pages import controller, node, realnodes, realrack, scheduler, sim
from benchmarks.pages.common import section_head

SECTIONS: Final[dict[str, Callable[[dict[str, Any]], str]]] = {
    "sim": sim.render,
    "node": node.render,
    "controller": controller.render,
    "realnodes": realnodes.render,
    "realrack": realrack.render,
    "scheduler": scheduler.render,
}
"""Results file (benchmarks/results/<name>.json) -> its section's body."""
HEAD_NOTES: Final = {"scheduler": scheduler.HEAD_NOTE}
"""What a section's head says instead of its file's conditions, where its parts
ran apart and each says its own."""

HOW: Final = """# Benchmarks

## How pages are made

Every figure on this page, on docs/reliability.md and docs/scale.md, and in the
generated blocks of docs/simulator.md, docs/device-model.md, docs/whatif.md,
docs/queues.md and README.md is rendered by `make pages`
(`python -m benchmarks.render`) from the committed results in
`benchmarks/results/*.json` alone. A benchmark only measures, writes its results
file and renders the pages again; `tests/benchmarks/test_pages.py` renders every
page and the plots of docs/scale.md from the committed results and fails when a
committed one differs (the plots come out byte for byte the same with the
plotting library the lock file pins).

Each benchmark records the machine's CPU count, the Kubernetes release, the
commit it ran from (and whether tracked files had uncommitted changes), and the
1-minute load average before its run, sampled during it and after it. It
refuses to start when the load exceeds the CPU count unless given `--noisy`
(`BENCH_ARGS=--noisy` through make). A run whose load exceeded the CPU count at
any reading, before, during or after, is noisy, however quiet its start
(benchmarks/conditions.py decides, for the results file and the page alike), and
its section says so loudly; what an older results file did not record, its
section says was not recorded. Where a figure is timed over repeated runs
(taken in turn, interleaved with what it is compared with), a table gives the
median with the range of the runs in brackets; under a table whose figures come
from a single run, as older results do, a line says so. A tail quantile over
fewer than 100 samples is called max. Ratios compare against a baseline
measured in the same run, so they travel between machines better than the
absolute figures.
"""


def document(results: Mapping[str, dict[str, Any]]) -> str:
    """The whole page from the results files there are."""
    parts = [HOW]
    for name, body in SECTIONS.items():
        if name in results:
            payload = results[name]
            head = section_head(name, payload, HEAD_NOTES.get(name))
            parts.append(f"{head}\n\n{body(payload).strip()}\n")
    return "\n".join(parts)
