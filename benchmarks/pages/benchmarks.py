"""The benchmark pages: docs/benchmarks.md, how pages are made and an index,
then one page per topic (docs/bench-*.md), each with one section per
benchmark results file, in a fixed order."""

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from benchmarks.pages import controller, node, realnodes, realrack, scheduler, sim
from benchmarks.pages.common import section_head

Section = Callable[[dict[str, Any]], str]


@dataclass(frozen=True)
class Topic:
    """One page: its title, what it measures, and its sections by results file."""

    title: str
    about: str
    sections: dict[str, Section]


TOPICS: Final[dict[str, Topic]] = {
    "bench-simulator.md": Topic(
        "the simulator's speed",
        "How fast the simulated hardware times a whole rack's training step, and "
        "what a node daemon's plan of one costs.",
        {"sim": sim.render},
    ),
    "bench-node-daemon.md": Topic(
        "the node daemon",
        "Our kubelet plugin's prepare and unprepare beside the Go reference plugin's, "
        "where its time goes, and its memory.",
        {"node": node.render},
    ),
    "bench-controller.md": Topic(
        "the controller",
        "Publishing racks beside the upstream Go ResourceSlice controller, no-op "
        "resyncs, one rack's change, memory, and a fleet filling up.",
        {"controller": controller.render},
    ),
    "bench-real-nodes.md": Topic(
        "real nodes",
        "Real kubelets calling our plugin and the Go reference plugin, and a whole "
        "rack on 36 real nodes: its start-up, memory and gang.",
        {"realnodes": realnodes.render, "realrack": realrack.render},
    ),
    "bench-scheduler.md": Topic(
        "the scheduler",
        "What the device layout costs the real kube-scheduler, device orders, "
        "random-mix packing, fleet sizes and busy fleets.",
        {"scheduler": scheduler.render},
    ),
}
"""Page (docs/<name>) -> its topic; a section is named after its results file
(benchmarks/results/<name>.json) and the make target that writes it
(`make bench-<name>`)."""
HEAD_NOTES: Final = {"scheduler": scheduler.HEAD_NOTE}
"""What a section's head says instead of its file's conditions, where its parts
ran apart and each says its own."""

HOW: Final = """# Benchmarks

## How pages are made

Every figure on the benchmark pages listed below, on docs/bench-first-runs.md
(the first `make demo` and `make test`), docs/reliability.md and
docs/scale.md, and in the generated blocks of docs/simulator.md,
docs/device-model.md, docs/bench-whatif.md, docs/queues.md and README.md is
rendered by `make pages` (`python -m benchmarks.render`) from the committed
results in `benchmarks/results/*.json` alone. A benchmark only measures,
writes its results file and renders the pages again;
`tests/benchmarks/test_pages.py` renders every page and the plots of
docs/scale.md from the committed results and fails when a committed one
differs (the plots come out byte for byte the same with the plotting library
the lock file pins).

Each benchmark records the machine's CPU count, the Kubernetes release, the
commit it ran from (and whether tracked files had uncommitted changes), and the
1-minute load average before its run, sampled during it and after it. It
refuses to start when the load exceeds the CPU count unless given `--noisy`
(`BENCH_ARGS=--noisy` through make). A run whose load exceeded the CPU count at
any reading, before, during or after, is noisy, however quiet its start
(benchmarks/conditions.py decides, for the results file and the page alike), and
its section says so loudly. Figures whose run did not record its load during
the run, its Kubernetes release and its commit are refused: `make pages` stops
and names them, so no page shows a figure without the conditions it ran under.
A section whose results file is not there names the command that measures it.
Where a figure is timed over repeated runs (taken in turn, interleaved with
what it is compared with), a table gives the
median with the range of the runs in brackets; under a table whose figures come
from a single run, as older results do, a line says so. A tail quantile over
fewer than 100 samples is called max. Ratios compare against a baseline
measured in the same run, so they travel between machines better than the
absolute figures.

## The pages
"""


def index_line(name: str, topic: Topic, results: Mapping[str, dict[str, Any]]) -> str:
    """A page's line in the index: what it measures, and when each of its
    results files last ran and by which command."""
    runs = [
        f"`{results[f]['command']}` on {results[f]['machine']['date']}"
        for f in topic.sections
        if f in results
    ]
    when = f"Last run: {'; '.join(runs)}." if runs else "Not measured yet."
    return f"- [{name}]({name}): {topic.about} {when}"


def index(results: Mapping[str, dict[str, Any]]) -> str:
    lines = [index_line(name, topic, results) for name, topic in TOPICS.items()]
    return HOW + "\n" + "\n".join(lines) + "\n"


def topic_page(topic: Topic, results: Mapping[str, dict[str, Any]]) -> str:
    """A topic's page from the results files there are; a section whose file
    is not there names the command that writes it."""
    files = [f"`benchmarks/results/{name}.json`" for name in topic.sections if name in results]
    source = f"from {' and '.join(files)}" if files else "from what its sections' commands write"
    parts = [
        f"# Benchmarks: {topic.title}\n\n{topic.about}\n\nEvery figure on this page is "
        f"rendered by `make pages` {source}; how, and what a noisy run means: "
        "[benchmarks.md](benchmarks.md#how-pages-are-made).\n"
    ]
    for name, body in topic.sections.items():
        if name not in results:
            parts.append(f"## {name}\n\nNot measured: `make bench-{name}` measures it.\n")
            continue
        payload = results[name]
        head = section_head(name, payload, HEAD_NOTES.get(name))
        parts.append(f"{head}\n\n{body(payload).strip()}\n")
    return "\n".join(parts)


def documents(results: Mapping[str, dict[str, Any]]) -> dict[str, str]:
    """Every benchmark page by file name: the index, then each topic."""
    out = {"benchmarks.md": index(results)}
    out.update({name: topic_page(topic, results) for name, topic in TOPICS.items()})
    return out
