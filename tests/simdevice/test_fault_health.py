"""Health per place: a fault of one core leaves the chip's other cores alone."""

from simdevice.faulthealth import fault_health
from simdevice.faults import Fault, FaultKind


def test_core_faults_stay_on_their_core_and_chip_faults_cover_the_chip() -> None:
    faults = [
        Fault(FaultKind.CORE_HANG, chip=3, core=2),
        Fault(FaultKind.ECC_UNCORRECTED_SRAM, chip=3, core=5),
        Fault(FaultKind.ECC_UNCORRECTED_HBM, chip=1),
        Fault(FaultKind.ECC_CORRECTED_SRAM, chip=0, core=1),
        Fault(FaultKind.LINK_DOWN, chip=3),
    ]
    health = fault_health(faults)
    assert list(health) == [(1, None), (3, None), (3, 2), (3, 5)]
    assert {place: h.state for place, h in health.items()} == {
        (1, None): "failed",
        (3, None): "degraded",
        (3, 2): "degraded",
        (3, 5): "failed",
    }
    assert health[(3, 5)].reason == "uncorrected SRAM ECC error (core 5)"


def test_no_faults_no_places() -> None:
    assert fault_health([]) == {}
