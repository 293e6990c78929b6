"""Slices edited by someone else, against the real controller (resync period
300 s, as the chart's): every edit is undone by the controller's reaction."""

from collections.abc import Iterator
from functools import partial

import pytest

from localsim.controlplane.plane import ControlPlane
from testbed.chaos import slice_edits
from testbed.chaos.fuzzing import ACCEPTED, run_property

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def rack(
    control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[slice_edits.LiveRack]:
    log = tmp_path_factory.mktemp("slice-edits") / "controller.log"
    with slice_edits.live_rack(control_plane, log) as live:
        yield live


@pytest.mark.parametrize(
    "edit",
    [
        ("device-attribute", 1, 0, "x"),
        ("label", 2, 0, None),
        ("rack-label", 1, 0, None),
        ("managed-by", 1, 0, None),
        ("delete", 3, 0, None),
    ],
)
def test_an_edit_is_undone_before_the_resync(
    rack: slice_edits.LiveRack, edit: tuple[str, int, int, object]
) -> None:
    assert slice_edits.check_live_edit(rack, [edit]) == ACCEPTED


def test_fuzzed_edits_are_undone(rack: slice_edits.LiveRack) -> None:
    check = partial(slice_edits.check_live_round, rack)
    run = run_property("slice edits", slice_edits.edit_rounds(2), check, 4)
    assert run.crashes == run.hangs == 0 and run.cases == 2 * run.rounds, (run, rack.unrestored)
