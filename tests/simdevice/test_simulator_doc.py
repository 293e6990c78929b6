"""docs/simulator.md types no figure by hand: its tables are what `make
validate-sim` writes from the code (and from the committed results; the
collectives tables: tests/benchmarks/test_sim_collectives.py), and any
figure left in the prose names the AWS (or OCP) source it quotes."""

import json
import re

import pytest

from benchmarks.pages.simulator import validation
from benchmarks.sim_validation import PAGE, RESULTS, STATIC_BLOCKS, block

TEXT = PAGE.read_text()
# a number with a unit the model has a constant for
FIGURE = re.compile(r"\d[\d,.]*\s*(?:GiB|MiB|KiB|TB/s|GB/s|GHz|us\b|TFLOPS|%)")
SOURCES = ("Neuron docs", "NKI ", "nki.isa", "OCP ")


@pytest.mark.parametrize("name", sorted(STATIC_BLOCKS))
def test_generated_block_matches_the_code(name: str) -> None:
    assert block(TEXT, name) == STATIC_BLOCKS[name](), f"run make validate-sim ({name})"


def test_validation_table_is_the_committed_results() -> None:
    results = json.loads(RESULTS.read_text())
    assert block(TEXT, "validation") == validation(results)


def hand_written(page: str) -> list[str]:
    """Paragraphs and list items outside generated blocks and code."""
    page = re.sub(r"<!-- ([a-z0-9-]+):start -->.*?<!-- \1:end -->", "", page, flags=re.DOTALL)
    page = re.sub(r"```.*?```", "", page, flags=re.DOTALL)
    return [p for p in re.split(r"\n\s*\n|\n(?=- )", page) if p.strip()]


def unsourced(page: str) -> list[str]:
    return [p for p in hand_written(page) if FIGURE.search(p) and not any(s in p for s in SOURCES)]


def test_every_hand_written_figure_names_its_source() -> None:
    assert unsourced(TEXT) == []


def test_the_check_catches_a_typed_figure() -> None:
    typed = TEXT.replace("## Jobs on a server\n", "## Jobs on a server\n\nHBM is 144 GiB.\n")
    assert unsourced(typed) == ["HBM is 144 GiB."]
