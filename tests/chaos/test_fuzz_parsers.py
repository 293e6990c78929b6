"""Every pure input edge under hypothesis: no crash, refusals name the field
and the allowed values, accepted input is well typed (benchmarks/chaos.py
runs the same properties with 10,000 cases each), and a damaged checkpoint
through the daemon's start-up steps in process."""

from collections.abc import Callable
from functools import partial
from typing import Any

import pytest
from hypothesis import strategies as st

from testbed.chaos import parser_edges as edges
from testbed.chaos import startup_edge
from testbed.chaos.fuzzing import run_property

CASES = 200

EDGES: dict[str, tuple[st.SearchStrategy[Any], Callable[[Any], str]]] = {
    "opaque config": (edges.configs, edges.check_config),
    "UltraServer spec": (edges.specs, edges.check_spec),
    "health report": (edges.reports, edges.check_report),
    "checkpoint file": (edges.checkpoint_files, edges.check_checkpoint),
    "slice edited by someone else": (edges.slice_edits, edges.check_slice_edit),
}


@pytest.mark.parametrize("edge", list(EDGES))
def test_edge_survives_fuzzing(edge: str) -> None:
    strategy, check = EDGES[edge]
    cases = CASES // 2 if edge.startswith("slice") else CASES
    run = run_property(edge, strategy, check, cases)
    assert run.cases >= cases // 2 and run.crashes == 0, run


def test_damaged_checkpoint_through_the_start_up_steps() -> None:
    with startup_edge.scratch() as root:
        run = run_property(
            "start-up", edges.checkpoint_files, partial(startup_edge.check_restore, root), CASES
        )
    assert run.cases >= CASES // 2 and run.crashes == 0 and run.accepted and run.refused, run
