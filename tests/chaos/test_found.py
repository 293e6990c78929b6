"""The smallest inputs the fuzzing found that once crashed a parser, kept as
regression cases: each must now be refused with its field named."""

import json
from pathlib import Path
from typing import Any

import pytest

from driver.devicemodel.profiles import TRAINIUM
from driver.devicemodel.ultraserver import SpecError, parse_spec
from driver.node.claimconfig import ConfigError, parse_config
from driver.node.durable.checkpoint import CheckpointError, checksum, decode
from simdevice.workloads import WorkloadError, parse_workload

META = {"name": "found", "uid": "u", "generation": 1}
GEN1 = {"generation": "trn3-gen1", "nodes": {"selector": {"matchLabels": {"rack": "a"}}}}


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        (True, "spec:"),
        ({"generation": "trn3-gen1", "nodes": 7}, "spec.nodes:"),
        ({"generation": "trn3-gen1", "nodes": {"names": 4}}, "spec.nodes.names:"),
        ({"generation": "trn3-gen1", "nodes": {"names": [[], {}, 1, 2]}}, "spec.nodes.names:"),
        ({**GEN1, "defaultLogicalNeuronCore": "x"}, "spec.defaultLogical"),
        ({**GEN1, "defaultLogicalNeuronCore": 3}, "spec.defaultLogical"),
        ({**GEN1, "fabric": []}, "spec.fabric:"),
        ({**GEN1, "fabric": {"failedServers": 1}}, "spec.fabric.failed"),
        ({**GEN1, "fabric": {"bindingConditions": "false"}}, "spec.fabric.b"),
    ],
)
def test_ultraserver_spec_refused_by_field(spec: Any, field: str) -> None:
    with pytest.raises(SpecError) as err:
        parse_spec({"metadata": META, "spec": spec})
    assert str(err.value).startswith(field)


@pytest.mark.parametrize(
    "record",
    [None, [], {"devices": "x"}, {"uid": 1, "namespace": "n", "name": "c", "state": "s"}],
)
def test_checkpoint_record_of_the_wrong_shape_is_refused(record: Any) -> None:
    body = {"x": record}
    data = json.dumps({"version": 1, "checksum": checksum(body), "claims": body}).encode()
    with pytest.raises(CheckpointError) as err:
        decode(data, Path("/state/checkpoint.json"))
    assert str(err.value).startswith("/state/checkpoint.json: ")


def test_a_checkpoint_record_under_another_uid_is_refused() -> None:
    """Found by the start-up edge: the daemon kept the record but wrote its
    CDI spec under the record's own UID, then removed it as unrecorded."""
    record = {
        "uid": "",
        "namespace": "ns",
        "name": "c",
        "state": "PrepareCompleted",
        "lnc": 1,
        "visible_cores": [0],
        "devices": [],
        "token_sha256": "0" * 64,
    }
    body = {"a-uid": record}
    data = json.dumps({"version": 1, "checksum": checksum(body), "claims": body}).encode()
    with pytest.raises(CheckpointError) as err:
        decode(data, Path("/state/checkpoint.json"))
    assert str(err.value).startswith("/state/checkpoint.json: claims.a-uid.uid: ")
    assert "move it aside" in str(err.value)


@pytest.mark.parametrize("lnc", [2.0, 1.0, True])
def test_a_logical_neuron_core_that_is_not_an_integer_is_refused(lnc: Any) -> None:
    """2.0 equals 2, so it once passed the check and reached prepare as a float."""
    parameters = {
        "apiVersion": TRAINIUM.dialect.api_version,
        "kind": "NeuronConfig",
        "logicalNeuronCore": lnc,
    }
    with pytest.raises(ConfigError) as err:
        parse_config(parameters, "config")
    assert str(err.value).startswith("config.logicalNeuronCore: must be one of 1, 2, 4")


@pytest.mark.parametrize("kind", [[], {}, [1]])
def test_a_workload_kind_that_is_not_text_is_refused(kind: Any) -> None:
    """Found by the workload API edge: a list as kind was looked up in a dict
    and the daemon answered 500."""
    with pytest.raises(WorkloadError) as err:
        parse_workload({"kind": kind})
    assert str(err.value).startswith("kind: ") and "gemm" in str(err.value)
