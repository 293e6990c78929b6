"""Every benchmark page, rendered from benchmarks/results/*.json alone:
docs/benchmarks.md and its topic pages (docs/bench-*.md), docs/reliability.md,
docs/scale.md (and its plots) and the generated blocks of docs/simulator.md (its
validation and its collectives),
docs/device-model.md (what the node pool layout costs the scheduler),
docs/bench-whatif.md (the what-if's example and its live replays),
docs/queues.md (what Kueue's policies cost), docs/aws-neuron.md (the
UltraServer operator's failure strategies and its scale), README.md's box of
the first `make demo` and `make test` and docs/bench-first-runs.md, which tells
them in full. Figures whose run did not record its conditions are refused:
nothing is written, and the message names them (exit code 2).

Usage: python -m benchmarks.render (`make pages`)
"""

import json
import sys
from pathlib import Path
from typing import Any

from benchmarks.pages import (
    benchmarks,
    devicemodel,
    readme,
    reliability,
    scale,
    sim_collectives,
    simulator,
    usoperator,
    usoperator_scale,
    whatif,
    whatif_live,
)
from benchmarks.pages.common import NotRecordedError
from benchmarks.pages.plots import plot
from benchmarks.paths import DOCS, RESULTS_DIR

IMAGES = DOCS / "images"
PLOT_PREFIX = "scale-"


def results(results_dir: Path = RESULTS_DIR) -> dict[str, dict[str, Any]]:
    """Every results file by name (`controller` for controller.json)."""
    out: dict[str, dict[str, Any]] = {}
    for path in sorted(results_dir.glob("*.json")):
        out[path.stem] = json.loads(path.read_text())
    return out


def pages(found: dict[str, dict[str, Any]], docs: Path = DOCS) -> dict[Path, str]:
    """Each page's path and its text. The simulator page's prose is its own, so
    its current text is the template its blocks are written into."""
    out = {docs / name: text for name, text in benchmarks.documents(found).items()}
    if "chaos" in found:
        out[docs / "reliability.md"] = reliability.render(found["chaos"])
    if "controller" in found:
        out[docs / "scale.md"] = scale.document(
            found["controller"], found.get("scale"), found.get("scheduler"), found.get("storage")
        )
    if "whatif" in found or "whatif-live" in found:
        page = docs / "bench-whatif.md"
        text = page.read_text()
        if "whatif" in found:
            text = whatif.render(text, found["whatif"])
        if "whatif-live" in found:
            text = whatif_live.render(text, found["whatif-live"])
            queues = docs / "queues.md"
            out[queues] = whatif_live.queues(queues.read_text(), found["whatif-live"])
        out[page] = text
    if "scheduler" in found:
        page = docs / "device-model.md"
        out[page] = devicemodel.render(page.read_text(), found["scheduler"])
    if "sim-validation" in found or "sim-collectives" in found:
        page = docs / "simulator.md"
        text = page.read_text()
        if "sim-validation" in found:
            text = simulator.render(text, found["sim-validation"])
        if "sim-collectives" in found:
            text = sim_collectives.render(text, found["sim-collectives"])
        out[page] = text
    page = docs / "aws-neuron.md"
    text = page.read_text()
    if "usoperator" in found:
        text = usoperator.render(text, found["usoperator"])
    out[page] = usoperator_scale.render(text, found.get("usoperator-scale"))
    readme_page = docs.parent / "README.md"
    out[readme_page] = readme.render(readme_page.read_text(), found)
    out[docs / readme.PAGE] = readme.first_runs_page(found)
    return out


def write_plots(found: dict[str, dict[str, Any]], images: Path = IMAGES) -> list[Path]:
    """The scale page's plots, one per projected figure, into `images`; plots
    of figures no longer projected are removed."""
    if "controller" not in found:
        return []
    lines = scale.lines_of(found["controller"], found.get("scale"))
    written = []
    for key, line in lines.items():
        if line.projects():
            path = images / scale.plot_name(key)
            plot(path, *scale.TITLES[key], line)
            written.append(path)
    for stale in set(images.glob(f"{PLOT_PREFIX}*.png")) - set(written):
        stale.unlink()
    return written


def write_pages() -> list[Path]:
    """Render every page and plot from the committed results and write them."""
    found = results()
    written = []
    for path, text in pages(found).items():
        path.write_text(text)
        written.append(path)
    return written + write_plots(found)


def main() -> int:
    try:
        written = write_pages()
    except NotRecordedError as refused:
        print(f"make pages: {refused}", file=sys.stderr)
        return 2
    for path in written:
        print(f"wrote {path.relative_to(DOCS.parent)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
