"""A claim written for AWS's Neuron DRA driver, prepared on this node (pure):
AWS's device names and attributes to cores, its opaque configs checked."""

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from driver.controller.slices import build_slices
from driver.devicemodel.awsprofile import INSTANCE_TYPES, AwsVersions
from driver.devicemodel.devicecores import AllocationError
from driver.devicemodel.placement import NodePlace
from driver.devicemodel.poolplan import AwsRack, RackInput
from driver.devicemodel.profiles import AWS
from driver.node import cdi
from driver.node.claimconfig import ConfigError, parse_config
from driver.node.devices import claim_grant, device_attributes
from driver.node.durable.checkpoint import ClaimRecord, records
from simdevice.topology import CoreRange, rack_spec

DRIVER = "neuron.aws.com"
TRN2 = rack_spec("trn2")


def attributes(itype: str, nodes: dict[int, str]) -> Any:
    found = build_slices(
        RackInput(
            name="us-a",
            rack=TRN2,
            mode="partitioned",
            flat_device="chip",
            nodes=nodes,
            rack_nodes=None,
            taints={},
            binding_conditions=False,
            aws=AwsRack(INSTANCE_TYPES[itype], AwsVersions(dra_driver="0.1.0")),
        ),
        DRIVER,
    )
    return device_attributes(found, DRIVER)


def claim(pool: str, devices: list[str], *configs: dict[str, Any]) -> dict[str, Any]:
    results = [{"request": "neurons", "driver": DRIVER, "pool": pool, "device": d} for d in devices]
    config = [
        {
            "source": "FromClaim",
            "requests": ["neurons"],
            "opaque": {"driver": DRIVER, "parameters": c},
        }
        for c in configs
    ]
    return {"status": {"allocation": {"devices": {"results": results, "config": config}}}}


def neuron_config(lnc: int) -> dict[str, Any]:
    return {"apiVersion": "neuron.aws.com/v1", "kind": "NeuronConfig", "logicalNeuronCore": lnc}


def ultraserver_config(mode: Any) -> dict[str, Any]:
    return {"apiVersion": "neuron.aws.com/v1", "kind": "UltraServerConfig", "ultraserverMode": mode}


STANDALONE = NodePlace("node-a", "us-a", 0, TRN2)


def test_four_connected_chips_with_lnc_1_give_their_32_logical_cores() -> None:
    names = [f"neurondevice{i}" for i in (4, 5, 6, 7)]
    grant = claim_grant(
        claim("node-a", names, neuron_config(1)),
        attributes("trn2.48xlarge", {0: "node-a"}),
        STANDALONE,
        DRIVER,
        2,
        dialect=AWS.dialect,
    )
    assert [d.ranges for d in grant.devices] == [(CoreRange(c, 0, 8),) for c in (4, 5, 6, 7)]
    assert grant.lnc == 1
    assert grant.visible_cores == tuple(range(32, 64))


def test_efa_interfaces_give_no_cores() -> None:
    grant = claim_grant(
        claim("node-a", ["neurondevice0", "efa0"]),
        attributes("trn2.48xlarge", {0: "node-a"}),
        STANDALONE,
        DRIVER,
        2,
        dialect=AWS.dialect,
    )
    assert [d.ranges for d in grant.devices] == [(CoreRange(0, 0, 8),), ()]
    assert grant.visible_cores == (0, 1, 2, 3)


def test_the_node_device_with_ultraserver_mode_gives_every_chip_and_the_mode() -> None:
    place = NodePlace("node-b", "us-a", 1, TRN2)
    grant = claim_grant(
        claim("node-b", ["neuronnode"], ultraserver_config(4), neuron_config(1)),
        attributes("trn2u.48xlarge", {0: "node-a", 1: "node-b"}),
        place,
        DRIVER,
        2,
        dialect=AWS.dialect,
    )
    assert grant.ultraserver_mode == 4
    assert len(grant.visible_cores) == 16 * 8


def test_a_device_of_another_node_pool_is_refused() -> None:
    with pytest.raises(AllocationError, match="pool 'node-b', but this is node node-a"):
        claim_grant(
            claim("node-b", ["neurondevice0"]),
            attributes("trn2u.48xlarge", {0: "node-a", 1: "node-b"}),
            STANDALONE,
            DRIVER,
            2,
            dialect=AWS.dialect,
        )


def test_ultraserver_config_on_a_chip_is_refused() -> None:
    with pytest.raises(ConfigError, match="UltraServerConfig applies to request 'neurons'"):
        claim_grant(
            claim("node-a", ["neurondevice0"], ultraserver_config(2)),
            attributes("trn2.48xlarge", {0: "node-a"}),
            STANDALONE,
            DRIVER,
            2,
            dialect=AWS.dialect,
        )


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"apiVersion": "neuron.aws.com/v1", "kind": "GpuConfig"}, "p.kind: must be one of"),
        (ultraserver_config(3), "p.ultraserverMode: must be one of 1, 2, 4, got 3"),
        (neuron_config(3), "p.logicalNeuronCore: must be one of 1, 2, 4, got 3"),
        (
            {**neuron_config(1), "ultraserverMode": 2},
            "p.ultraserverMode: unknown field of NeuronConfig",
        ),
        (
            {**neuron_config(1), "apiVersion": "trainium.sim.dev/v1alpha1"},
            'p.apiVersion: must be "neuron.aws.com/v1"',
        ),
    ],
)
def test_bad_aws_configs_name_the_field(params: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_config(params, "p", AWS.dialect)


def test_the_ultraserver_mode_reaches_the_container_as_the_neuron_runtime_reads_it() -> None:
    edits = cdi.ClaimEdits(
        claim_uid="u1",
        visible_cores=(0, 1),
        lnc=1,
        workload_socket=Path("/s/workload/workload.sock"),
        token_file=Path("/s/claims/u1.token"),
        node_name="node-b",
        ultraserver="us-a",
        server_index=1,
        generation="trn3-gen2",
        ring=(),
        fabric_ips=(),
        ultraserver_mode=4,
    )
    env = cdi.claim_spec(DRIVER, edits)["devices"][0]["containerEdits"]["env"]
    assert "NEURON_RT_ULTRASERVER_MODE=4" in env
    assert "NEURON_RT_ULTRASERVER_NODE_ID=1" in env
    assert f"NEURON_RT_ULTRASERVER_SERVER_ID={cdi.ultraserver_id('us-a')}" in env
    assert "NEURON_LOGICAL_NC_CONFIG=1" in env
    plain = cdi.claim_spec(DRIVER, replace(edits, ultraserver_mode=None))
    assert not any("ULTRASERVER_MODE" in e for e in plain["devices"][0]["containerEdits"]["env"])


def test_a_record_without_a_mode_is_written_as_before_and_one_with_it_reads_back() -> None:
    record = ClaimRecord("u1", "ns", "c", "PrepareCompleted", 1, [0], [])
    assert "ultraserver_mode" not in record.plain()
    with_mode = replace(record, ultraserver_mode=2)
    assert records({"u1": with_mode.plain()}, Path("checkpoint.json"))["u1"] == with_mode
