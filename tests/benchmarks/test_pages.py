"""The committed benchmark pages are what the committed results render: no
figure on them is typed by hand or left over from an older run."""

import copy
from pathlib import Path

import pytest

from benchmarks import render
from benchmarks.paths import DOCS

FOUND = render.results()
RENDERED = render.pages(FOUND)
PAGES = (
    "benchmarks.md",
    "reliability.md",
    "scale.md",
    "simulator.md",
    "device-model.md",
    "whatif.md",
    "queues.md",
)
FIX = "run `make pages` (python -m benchmarks.render) and commit the result"


@pytest.mark.parametrize("name", PAGES)
def test_committed_page_is_rendered_from_the_results(name: str) -> None:
    page = DOCS / name
    assert page in RENDERED, f"docs/{name}: no renderer produced it"
    assert page.read_text() == RENDERED[page], (
        f"docs/{name} differs from what benchmarks/results/*.json render: {FIX}"
    )


def test_committed_plots_are_rendered_from_the_results(tmp_path: Path) -> None:
    drawn = render.write_plots(FOUND, tmp_path)
    committed = sorted(p.name for p in (DOCS / "images").glob(f"{render.PLOT_PREFIX}*.png"))
    assert sorted(p.name for p in drawn) == committed, f"docs/images plots: {FIX}"
    for plot in drawn:
        assert plot.read_bytes() == (DOCS / "images" / plot.name).read_bytes(), (
            f"docs/images/{plot.name} differs from what the results draw: {FIX}"
        )


def test_a_changed_result_changes_its_page() -> None:
    changed = copy.deepcopy(FOUND)
    changed["controller"]["results"]["publish"][0]["seconds"] += 1.0
    assert render.pages(changed)[DOCS / "benchmarks.md"] != RENDERED[DOCS / "benchmarks.md"]
    assert render.pages(changed)[DOCS / "scale.md"] != RENDERED[DOCS / "scale.md"]


def test_a_changed_etcd_measurement_changes_the_scale_page() -> None:
    changed = copy.deepcopy(FOUND)
    for run in next(iter(changed["storage"]["results"]["runs"].values())):
        run["etcd_bytes_per_rack"] *= 2
    assert render.pages(changed)[DOCS / "scale.md"] != RENDERED[DOCS / "scale.md"]


def test_every_results_file_reaches_a_page() -> None:
    """A results file no page renders would be figures nobody sees."""
    text = "\n".join(RENDERED.values())
    for name, payload in FOUND.items():
        command = payload.get("command") or next(iter(payload.get("commands", {}).values()), "")
        shown = command in text or name == "sim-validation"  # validation carries no command
        assert shown, f"benchmarks/results/{name}.json: no page shows its command"


def test_readme_first_run_figure_is_rendered_from_its_results() -> None:
    readme = DOCS.parent / "README.md"
    assert readme in RENDERED, "README.md: no renderer produced it (first-demo.json missing?)"
    assert readme.read_text() == RENDERED[readme], f"README.md's generated block: {FIX}"
    changed = copy.deepcopy(FOUND)
    changed["first-demo"]["results"]["make_demo_seconds"] += 120.0
    assert render.pages(changed)[readme] != RENDERED[readme]


def test_a_changed_fleet_run_changes_the_device_model_page() -> None:
    page = DOCS / "device-model.md"
    changed = copy.deepcopy(FOUND)
    for run in changed["scheduler"]["results"]["racks"]["10"]["node pools"]:
        run["profile"]["parts_cum_percent"]["node selectors"] += 10.0
    assert render.pages(changed)[page] != RENDERED[page]
