"""The builder's shortcuts (in-range slices, one row per emit, the paused
collector) give what the general paths give."""

import gc

import pytest

from simdevice.isa import ProgramBuilder, ProgramError, Queue, View, collector_paused


def test_in_range_and_open_slices_make_the_same_views() -> None:
    t = ProgramBuilder("views").sbuf("t", 128, 64)
    assert t[0:128, 3:7] == View(t, 0, 128, 3, 7)
    assert t[:, 3:] == View(t, 0, 128, 3, 64)
    assert t[5:, :7] == View(t, 5, 128, 0, 7)
    assert t[0:128, 0:64] == t.all()
    with pytest.raises(ProgramError, match=r"^cols: empty slice"):
        t[0:1, 7:7]
    with pytest.raises(ProgramError, match=r"^rows: \[-1:4\] is outside"):
        t[-1:4, 0:1]


def test_build_splits_the_rows_into_columns_in_emit_order() -> None:
    pb = ProgramBuilder("rows")
    x = pb.sbuf("x", 128, 64, "fp32")
    first = pb.activation(x.all(), x.all(), "exp", signal="s")
    pb.copy(x.all(), x.all(), queue=Queue.GPSIMD, wait=(first,))
    program = pb.build()
    assert list(program.queue) == [Queue.SCALAR, Queue.GPSIMD]
    assert list(program.a) == [64.0, 64.0]
    assert program.waits == [(), (0,)]
    assert program.signal == [0, -1]
    assert len(program) == 2
    assert pb.build() is program  # building again changes nothing
    assert len(program) == 2


@pytest.mark.parametrize("enabled", [True, False])
def test_the_collector_is_paused_inside_and_left_as_it_was(enabled: bool) -> None:
    was = gc.isenabled()
    try:
        (gc.enable if enabled else gc.disable)()
        with collector_paused():
            assert not gc.isenabled()
        assert gc.isenabled() is enabled
        with pytest.raises(RuntimeError), collector_paused():
            raise RuntimeError("a failing build")
        assert gc.isenabled() is enabled
    finally:
        (gc.enable if was else gc.disable)()
