"""Platform faults under a small rack with pods running: every fault leaves
no device duplicated or lost, no claim prepared twice, no core leaked and no
pod evicted (benchmarks/chaos.py times the same runs)."""

from collections.abc import Iterator

import pytest

from testbed.chaos.localrack import ChaosCluster
from testbed.chaos.platform import FAULTS, Scene

pytestmark = pytest.mark.integration

PODS = 4


@pytest.fixture(scope="module")
def scene(chaos_rack: ChaosCluster) -> Iterator[Scene]:
    scene = Scene(chaos_rack, PODS)
    yield scene
    scene.clear()


@pytest.mark.parametrize("fault", list(FAULTS))
def test_fault_leaves_nothing_behind(scene: Scene, fault: str) -> None:
    run = FAULTS[fault](scene)
    assert run.audit.clean(), run.to_json()
