"""Opaque config validation: clear errors naming the field, for any malformed input."""

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from driver.devicemodel.profiles import TRAINIUM
from driver.node.claimconfig import (
    ConfigError,
    DeviceConfig,
    configs_by_request,
    parse_config,
    request_matches,
)

WHERE = "status.allocation.devices.config[0].opaque.parameters"
API_GROUP_VERSION = TRAINIUM.dialect.api_version


def test_valid_configs() -> None:
    neuron = {"apiVersion": API_GROUP_VERSION, "kind": "NeuronConfig", "logicalNeuronCore": 4}
    assert parse_config(neuron, WHERE) == DeviceConfig("NeuronConfig", 4)
    rack = {"apiVersion": API_GROUP_VERSION, "kind": "UltraServerConfig"}
    assert parse_config(rack, WHERE) == DeviceConfig("UltraServerConfig", None)


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ("NeuronConfig", WHERE),
        ({"kind": "NeuronConfig"}, f"{WHERE}.apiVersion"),
        ({"apiVersion": "trainium.sim.dev/v9", "kind": "NeuronConfig"}, f"{WHERE}.apiVersion"),
        ({"apiVersion": API_GROUP_VERSION, "kind": "GpuConfig"}, f"{WHERE}.kind"),
        (
            {"apiVersion": API_GROUP_VERSION, "kind": "NeuronConfig", "logicalNeuronCore": 3},
            f"{WHERE}.logicalNeuronCore",
        ),
        (
            {"apiVersion": API_GROUP_VERSION, "kind": "NeuronConfig", "logicalNeuronCore": True},
            f"{WHERE}.logicalNeuronCore",
        ),
        (
            {"apiVersion": API_GROUP_VERSION, "kind": "NeuronConfig", "lnc": 2},
            f"{WHERE}.lnc",
        ),
    ],
)
def test_errors_name_the_field(params: Any, field: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config(params, WHERE)
    assert str(err.value).startswith(f"{field}: ")


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8,
)


@given(
    st.dictionaries(
        st.sampled_from(["apiVersion", "kind", "logicalNeuronCore", "mode", "x"]),
        json_values
        | st.sampled_from([API_GROUP_VERSION, "NeuronConfig", "UltraServerConfig", 1, 2, 4]),
    )
    | json_values
)
def test_any_input_is_accepted_or_refused_with_a_field(params: Any) -> None:
    try:
        parsed = parse_config(params, WHERE)
    except ConfigError as err:
        assert str(err).startswith(WHERE)
        assert ": " in str(err)
        return
    assert parsed.kind in ("NeuronConfig", "UltraServerConfig")
    assert parsed.logical_neuron_core in (None, 1, 2, 4)


def test_request_matching_covers_subrequests() -> None:
    assert request_matches([], "anything")
    assert request_matches(["gpu"], "gpu/large")
    assert not request_matches(["gpu"], "other")


def test_class_configs_come_before_claim_configs() -> None:
    def opaque(lnc: int) -> dict[str, Any]:
        return {
            "driver": "trainium.sim.dev",
            "parameters": {
                "apiVersion": API_GROUP_VERSION,
                "kind": "NeuronConfig",
                "logicalNeuronCore": lnc,
            },
        }

    devices = {
        "config": [
            {"source": "FromClaim", "requests": ["a"], "opaque": opaque(1)},
            {"source": "FromClass", "requests": [], "opaque": opaque(4)},
            {"source": "FromClaim", "opaque": {"driver": "other.dev", "parameters": 7}},
        ]
    }
    found = configs_by_request(devices, "trainium.sim.dev", ["a", "b"])
    assert [c.logical_neuron_core for c in found["a"]] == [4, 1]
    assert [c.logical_neuron_core for c in found["b"]] == [4]
