"""The prepare decision for devices AWS's UltraServer operator allocated to a
workload (AWS profile): a tagged chip or node device takes only the claims
labelled with its workloadId, a labelled claim only such devices of that
workload; EFA interfaces are not checked. Pure, then
through the real Preparer on real files with the claim served from memory
(the apiserver edge is tests/node/test_workload_prepare.py)."""

import tempfile
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from driver.controller.slices import build_slices
from driver.devicemodel.awsprofile import INSTANCE_TYPES, AwsVersions
from driver.devicemodel.devicecores import Attributes
from driver.devicemodel.placement import NodePlace
from driver.devicemodel.poolplan import AwsRack, RackInput
from driver.devicemodel.profiles import AWS
from driver.kubeletplugin.interface import ClaimRef
from driver.node.devices import device_attributes
from driver.node.durable.checkpoint import Checkpoint
from driver.node.durable.groupcommit import NodeState
from driver.node.metrics import DriverMetrics
from driver.node.paths import NodePaths
from driver.node.prepare import Preparer, ensure_dirs
from driver.node.workloadcheck import (
    ClaimDevice,
    WorkloadMismatchError,
    check_workload,
    workload_refusal,
)
from simdevice.topology import rack_spec

DRIVER = "neuron.aws.com"
TRN2 = rack_spec("trn2")
NODES = {0: "node-a", 1: "node-b"}
FIELD = 'metadata.labels["neuron.aws.com/workload-id"]'
TEMPLATE = "use the ResourceClaimTemplate the UltraServer operator generated for that workload"


def attributes(workloads: dict[str, str]) -> dict[tuple[str, str], Attributes]:
    found = build_slices(
        RackInput(
            name="us-a",
            rack=TRN2,
            mode="partitioned",
            flat_device="chip",
            nodes=NODES,
            rack_nodes=None,
            taints={},
            binding_conditions=False,
            aws=AwsRack(INSTANCE_TYPES["trn2u.48xlarge"], AwsVersions(dra_driver="0.1.0")),
            workloads=workloads,
        ),
        DRIVER,
    )
    return device_attributes(found, DRIVER)


TAGGED = attributes({"node-a": "wl-1"})


def claim(pool: str, devices: list[str], label: str | None = None) -> dict[str, Any]:
    results = [{"request": "neurons", "driver": DRIVER, "pool": pool, "device": d} for d in devices]
    meta: dict[str, Any] = {"name": "c", "namespace": "ns", "uid": "uid-1"}
    if label is not None:
        meta["labels"] = {"neuron.aws.com/workload-id": label, "app": "x"}
    return {"metadata": meta, "status": {"allocation": {"devices": {"results": results}}}}


def on(pool: str, *names: str) -> list[ClaimDevice]:
    return [ClaimDevice(pool, n, TAGGED[(pool, n)]) for n in names]


def test_the_node_daemon_reads_the_tag_back_as_published() -> None:
    assert TAGGED[("node-a", "neurondevice3")]["workloadId"] == "wl-1"
    assert "workloadId" not in TAGGED[("node-b", "neurondevice3")]


@pytest.mark.parametrize(
    ("pool", "label"),
    [("node-b", None), ("node-a", "wl-1")],
    ids=["untagged-unlabelled", "tagged-labelled"],
)
def test_matching_claims_prepare(pool: str, label: str | None) -> None:
    devices = on(pool, "neurondevice0", "neuronnode", "efa0")
    assert workload_refusal(claim(pool, [], label), devices, pool) is None
    check_workload(claim(pool, [], label), devices, pool)


def test_an_empty_label_is_no_label() -> None:
    assert workload_refusal(claim("node-b", [], ""), on("node-b", "neurondevice0"), "x") is None


def test_a_tagged_device_refuses_a_claim_without_the_label() -> None:
    message = workload_refusal(claim("node-a", []), on("node-a", "neurondevice2"), "node-a")
    assert message == (
        f"{FIELD}: device 'neurondevice2' of node node-a belongs to the UltraServer workload "
        'with workloadId "wl-1", and this claim has no neuron.aws.com/workload-id label; to '
        f"run in that workload, {TEMPLATE} (its claims carry the label "
        "neuron.aws.com/workload-id=wl-1 and select the workload's devices), or else claim "
        "devices of a node no workload holds"
    )


def test_a_tagged_device_refuses_another_workloads_claim() -> None:
    devices = on("node-a", *(f"neurondevice{i}" for i in range(5)))
    with pytest.raises(WorkloadMismatchError) as refused:
        check_workload(claim("node-a", [], "wl-2"), devices, "node-a")
    message = str(refused.value)
    assert message.startswith(
        f"{FIELD}: devices 'neurondevice0', 'neurondevice1', 'neurondevice2' and 2 more of "
        'node node-a belong to the UltraServer workload with workloadId "wl-1", but this '
        'claim belongs to workload "wl-2"; to run in workload "wl-1", '
    )
    assert "neuron.aws.com/workload-id=wl-1" in message


def test_a_labelled_claim_refuses_a_device_of_no_workload() -> None:
    devices = on("node-b", "neuronnode", "efa1")
    message = workload_refusal(claim("node-b", [], "wl-1"), devices, "node-b")
    assert message is not None
    assert message.startswith(
        f'{FIELD}: the claim belongs to the UltraServer workload with workloadId "wl-1", but '
        "device 'neuronnode' of node node-b belongs to no workload"
    )
    assert "neuron.aws.com/workload-id=wl-1" in message


def test_efa_interfaces_are_tagged_but_not_checked() -> None:
    """A workload's pods take their nodes' EFA interfaces with a template of
    their own (AWS's UltraServer examples), whose claims carry no label."""
    assert TAGGED[("node-a", "efa3")]["workloadId"] == "wl-1"
    efas = on("node-a", "efa0", "efa1")
    assert workload_refusal(claim("node-a", []), efas, "node-a") is None
    assert workload_refusal(claim("node-b", [], "wl-1"), on("node-b", "efa0"), "node-b") is None
    with_chip = [*efas, *on("node-a", "neurondevice0")]
    message = workload_refusal(claim("node-a", []), with_chip, "node-a")
    assert message is not None and "device 'neurondevice0' of node node-a" in message


def test_a_claim_with_devices_of_two_workloads_names_the_tagged_ones_first() -> None:
    mixed = [
        ClaimDevice("node-b", "neurondevice0", {"resourceType": "neuron_device"}),
        ClaimDevice(
            "node-a", "neurondevice1", {"resourceType": "neuron_device", "workloadId": "wl-3"}
        ),
    ]
    message = workload_refusal(claim("node-a", [], "wl-1"), mixed, "node-a")
    assert message is not None and "'neurondevice1'" in message and '"wl-3"' in message


class ClaimsInMemory:
    def __init__(self, claim: dict[str, Any]) -> None:
        self.claim = claim

    def get_claim(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.claim

    def attributes(self, keys: set[tuple[str, str]]) -> dict[tuple[str, str], Attributes]:
        return {k: TAGGED[k] for k in keys if k in TAGGED}

    def default_lnc(self, ultraserver: str) -> int | None:
        return None


def preparer(root: Path, claim: dict[str, Any], workload_tags: bool = True) -> Preparer:
    paths = NodePaths(root / "kubelet", DRIVER, root / "state", root / "cdi")
    ensure_dirs(paths)
    return Preparer(
        driver=DRIVER,
        dialect=AWS.dialect,
        workload_tags=workload_tags,
        place=NodePlace("node-a", "us-a", 0, TRN2),
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


REF = ClaimRef(namespace="ns", name="c", uid="uid-1")


def test_the_preparer_refuses_an_unlabelled_claim_on_tagged_devices_and_writes_nothing() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        devices = ["neurondevice0", "efa0", "neurondevice1"]
        result = preparer(root, claim("node-a", devices)).prepare([REF])
        error = result["uid-1"].error
        assert error.startswith(
            f"claim ns/c: {FIELD}: devices 'neurondevice0', 'neurondevice1' of node node-a"
        )
        assert not result["uid-1"].devices
        assert nothing_written(root)


def test_the_preparer_prepares_the_labelled_claim() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        result = preparer(root, claim("node-a", ["neurondevice0"], "wl-1")).prepare([REF])
        assert result["uid-1"].error == ""
        assert [d.device for d in result["uid-1"].devices] == ["neurondevice0"]
        assert "uid-1" in Checkpoint(root / "state" / "checkpoint.json").claims


def test_the_preparer_prepares_an_unlabelled_claim_of_a_tagged_nodes_efas() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        result = preparer(root, claim("node-a", ["efa0", "efa1"])).prepare([REF])
        assert result["uid-1"].error == ""
        assert [d.device for d in result["uid-1"].devices] == ["efa0", "efa1"]


def test_without_workload_tags_the_preparer_does_not_look() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        unlabelled = claim("node-a", ["neurondevice0"])
        result = preparer(root, unlabelled, workload_tags=False).prepare([REF])
        assert result["uid-1"].error == ""
