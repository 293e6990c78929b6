"""The collectives figures on docs/simulator.md come from
benchmarks/results/sim-collectives.json, and that file is what the model
computes today: neither the page nor the file can drift from the code."""

import copy
import json

from benchmarks import render, sim_collectives
from benchmarks.pages import sim_collectives as page
from benchmarks.paths import DOCS, RESULTS_DIR

PAYLOAD = json.loads((RESULTS_DIR / "sim-collectives.json").read_text())
FIX = "run `make sim-collectives` and commit the result"


def test_the_results_file_is_what_the_model_computes() -> None:
    figures = {k: v for k, v in PAYLOAD["results"].items() if k != "model"}
    assert figures == sim_collectives.compute(), f"busbw tables: {FIX}"
    assert PAYLOAD["results"]["model"] == sim_collectives.model(), f"model inputs: {FIX}"


def test_the_page_is_the_rendering_of_the_results_file() -> None:
    simulator = DOCS / "simulator.md"
    text = simulator.read_text()
    assert page.render(text, PAYLOAD) == text, f"docs/simulator.md: {FIX}"


def test_a_changed_figure_changes_the_page() -> None:
    changed = copy.deepcopy(PAYLOAD)
    changed["results"]["tables"][-1]["operations"][0]["cells"][0][-1]["busbw"] /= 2
    found = {**render.results(), "sim-collectives": changed}
    simulator = DOCS / "simulator.md"
    assert render.pages(found)[simulator] != simulator.read_text()


def test_every_generation_the_file_holds_has_its_tables_on_the_page() -> None:
    text = (DOCS / "simulator.md").read_text()
    tables = PAYLOAD["results"]["tables"]
    assert [t["generation"] for t in tables] == list(page.TABLE_BLOCKS)
    for found in tables:
        assert f"<!-- {page.TABLE_BLOCKS[found['generation']]}:start -->" in text
        assert all(f"| {name} |" in text for name in found["rows"])
