"""A reduced load run (the full 1,152 claims x 3 rounds is `make chaos`) and a
few fault-to-eviction trials, on the shared small rack. Timings are reported by the
benchmark, not asserted here."""

import pytest

from testbed.chaos.load import load_rounds
from testbed.chaos.localrack import ChaosCluster
from testbed.chaos.reaction import reaction_times

pytestmark = pytest.mark.integration

CLAIMS = 48
ROUNDS = 2


def test_load_rounds_match_prepares_and_leave_clean_checkpoints(chaos_rack: ChaosCluster) -> None:
    result = load_rounds(chaos_rack, CLAIMS, ROUNDS)
    for r in result["rounds"]:
        assert r["prepared"] == r["unprepared"] == CLAIMS, r
        assert r["request_errors"] == 0, r
        assert r["checkpoint_matches_when_running"] and r["checkpoint_empty_after_delete"], r
    assert result["bad_log_lines"] == []


def test_failed_chip_taints_and_evicts(chaos_rack: ChaosCluster) -> None:
    result = reaction_times(chaos_rack, 2)
    assert result["trials"] == 2
