"""Property tests of prepare: malformed opaque config gets a clear error naming
the field and leaves no file or checkpoint record; valid config prepares and
unprepares cleanly. The claims are served from memory (the apiserver edge is
covered by test_daemon.py); everything else is the real Preparer on real files.
"""

import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from driver.devicemodel.devicecores import Attributes
from driver.devicemodel.placement import NodePlace
from driver.kubeletplugin.interface import ClaimRef
from driver.node.devices import device_attributes
from driver.node.durable.checkpoint import Checkpoint
from driver.node.durable.groupcommit import NodeState
from driver.node.metrics import DriverMetrics
from driver.node.paths import NodePaths
from driver.node.prepare import Preparer, ensure_dirs
from tests.node.slicedata import DRIVER, RACK, allocated_claim, rack_slice

ATTRS = device_attributes([rack_slice("rack-a", range(2))], DRIVER)
WHERE = "status.allocation.devices.config[0].opaque.parameters"


class ClaimsInMemory:
    def __init__(self, claim: dict[str, Any]) -> None:
        self.claim = claim

    def get_claim(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.claim

    def attributes(self, keys: set[tuple[str, str]]) -> dict[tuple[str, str], Attributes]:
        return {k: ATTRS[k] for k in keys if k in ATTRS}

    def default_lnc(self, ultraserver: str) -> int | None:
        return None


def preparer(root: Path, claim: dict[str, Any]) -> Preparer:
    paths = NodePaths(root / "kubelet", DRIVER, root / "state", root / "cdi")
    ensure_dirs(paths)
    return Preparer(
        driver=DRIVER,
        place=NodePlace("node-1", "rack-a", 1, RACK),
        paths=paths,
        reader=ClaimsInMemory(claim),
        state=NodeState(Checkpoint(paths.checkpoint)),
        metrics=DriverMetrics(CollectorRegistry()),
        release_claim=lambda uid: None,
    )


def nothing_written(root: Path) -> bool:
    return (
        not list((root / "cdi").iterdir())
        and not list((root / "state" / "claims").iterdir())
        and Checkpoint(root / "state" / "checkpoint.json").claims == {}
    )


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10, 10) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=6,
)
nearly_valid = st.fixed_dictionaries(
    {
        "apiVersion": st.just("trainium.sim.dev/v1alpha1"),
        "kind": st.sampled_from(["NeuronConfig", "UltraServerConfig"]),
    },
    optional={"logicalNeuronCore": st.sampled_from([1, 2, 4, 3, 0, "2", True, None, 8])},
)
configs = (
    nearly_valid
    | st.dictionaries(
        st.sampled_from(["apiVersion", "kind", "logicalNeuronCore", "extra"]),
        json_values
        | st.sampled_from(
            ["trainium.sim.dev/v1alpha1", "NeuronConfig", "UltraServerConfig", 1, 2, 4]
        ),
    )
    | json_values
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(parameters=configs, device=st.sampled_from(["s1-c0-cores2-2", "s1-chip1", "rack"]))
def test_any_config_prepares_cleanly_or_fails_naming_the_field(
    parameters: Any, device: str
) -> None:
    config = [
        {
            "source": "FromClaim",
            "requests": [],
            "opaque": {"driver": DRIVER, "parameters": parameters},
        }
    ]
    claim = allocated_claim("rack-a", [device], config)
    ref = ClaimRef("ns", "u1", "c")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        p = preparer(root, claim)
        result = p.prepare([ref])["u1"]
        event("refused" if result.error else "prepared")
        if result.error:
            assert result.error.startswith("claim ns/c: status.allocation.devices.config")
            assert ": " in result.error.removeprefix("claim ns/c: ")
            assert nothing_written(root)
            return
        assert parameters["kind"] == "NeuronConfig" or device == "rack"
        assert len(list((root / "cdi").iterdir())) == 1
        assert p.unprepare([ref]) == {"u1": ""}
        assert nothing_written(root)
