"""The live replay's failures on its simulated clock, and the request each is."""

from simdevice.faults import Fault
from simdevice.topology import rack_spec
from whatif.faults import Failure, ScriptedFailures
from whatif.livefaults import FaultClock, fault_request

GEN1 = rack_spec("trn3-gen1")
CHIP, CORE_5 = 0xFF, 1 << 5


def test_each_failure_is_injected_when_due_and_cleared_after_the_repair_time() -> None:
    first, second = Failure(10.0, (0, 1, 3), CHIP), Failure(30.0, (0, 2, 0), CORE_5)
    clock = FaultClock(ScriptedFailures([first, second], repair_seconds=25.0))
    assert clock.next_time() == 10.0
    assert clock.due(9.9) == []
    [inject] = clock.due(10.0)
    assert (inject.inject, inject.failure) == (True, first)
    assert clock.next_time() == 30.0
    assert clock.outstanding() == [first]
    actions = clock.due(60.0)
    assert [(a.time, a.inject, a.failure) for a in actions] == [
        (30.0, True, second),
        (35.0, False, first),
        (55.0, False, second),
    ]
    assert clock.next_time() is None and clock.outstanding() == []
    assert clock.injected == [first, second]


def test_a_chip_fails_whole_and_a_core_alone() -> None:
    chip = fault_request(Failure(1.0, (0, 1, 3), CHIP), GEN1, "rack-a-node-1")
    core = fault_request(Failure(1.0, (0, 2, 7), CORE_5), GEN1, "rack-a-node-2")
    assert chip == {"node": "rack-a-node-1", "chip": 3, "kind": "ecc-uncorrected-hbm"}
    assert core == {"node": "rack-a-node-2", "chip": 7, "core": 5, "kind": "ecc-uncorrected-sram"}
    for body in (chip, core):
        fault = Fault(body["kind"], body["chip"], body.get("core"))
        assert fault.uncorrected
