"""The AWS-profile node daemon (a real process, its real DRA socket, claims the
real scheduler allocated) on a node whose devices carry the workloadId of AWS's
UltraServer operator: an unlabelled claim of a chip is refused with the
reason and nothing is prepared, the workload's labelled claim prepares, an
unlabelled claim of the node's EFA interfaces prepares (AWS's workloads take
them with a template of their own), and untagged devices prepare unlabelled
claims as before."""

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client as k8s

from driver.controller.slices import build_slices
from driver.devicemodel.awsprofile import INSTANCE_TYPES, AwsVersions
from driver.devicemodel.poolplan import AwsRack, RackInput
from driver.node.durable.checkpoint import Checkpoint
from localsim.controlplane.plane import ControlPlane
from localsim.standin.kubelet import KubeletError
from simdevice.topology import rack_spec
from testbed.controlplane import install
from testbed.daemon import Daemon, short_tmpdir
from testbed.rack import Rack, Site, published_rack

pytestmark = pytest.mark.integration

SITE = Site("wlprep.sim.dev", "wlprep-rack", "wlprep", ("wlprep-n0", "wlprep-n1"))
TAGGED, UNTAGGED = SITE.nodes
WORKLOAD_ID = "wlprep.train"
LABEL = "neuron.aws.com/workload-id"
ATTRS = f'device.attributes["{SITE.driver}"]'
CHIP = f'{ATTRS}.resourceType == "neuron_device"'


def aws_slices() -> list[dict[str, Any]]:
    """The controller's AWS slices of two trn2u.48xlarge nodes, the first one
    allocated to workload WORKLOAD_ID."""
    found = build_slices(
        RackInput(
            name=SITE.rack_id,
            rack=rack_spec("trn2"),
            mode="partitioned",
            flat_device="chip",
            nodes=dict(enumerate(SITE.nodes)),
            rack_nodes=None,
            taints={},
            binding_conditions=False,
            aws=AwsRack(INSTANCE_TYPES["trn2u.48xlarge"], AwsVersions(dra_driver="0.1.0")),
            workloads={TAGGED: WORKLOAD_ID},
        ),
        SITE.driver,
    )
    for s in found:
        s["spec"]["pool"]["generation"] = 1
    return found


@pytest.fixture(scope="module")
def rack(control_plane: ControlPlane) -> Iterator[Rack]:
    install(control_plane)
    with published_rack(control_plane, SITE, aws_slices()) as published:
        yield published


@pytest.fixture(scope="module")
def daemon(control_plane: ControlPlane, rack: Rack) -> Iterator[Daemon]:
    with short_tmpdir() as workdir:
        args = ("--profile", "aws", "--generation", "trn2")
        running = Daemon(workdir, control_plane.kubeconfig, site=SITE, extra_args=args).start()
        yield running
        assert running.stop() == 0


def create_claim(rack: Rack, name: str, selector: str, label: str | None) -> None:
    meta: dict[str, Any] = {"name": name, "namespace": SITE.namespace}
    if label is not None:
        meta["labels"] = {LABEL: label}
    request = {
        "deviceClassName": SITE.driver,
        "count": 1,
        "selectors": [{"cel": {"expression": selector}}],
    }
    body = {
        "metadata": meta,
        "spec": {"devices": {"requests": [{"name": "req", "exactly": request}]}},
    }
    k8s.ResourceV1Api(rack.api).create_namespaced_resource_claim(SITE.namespace, body)


def prepare(daemon: Daemon, rack: Rack, name: str, node: str) -> tuple[Any, Any]:
    """Schedule the claim's pod on `node` and prepare it there as the kubelet does."""
    rack.create_pod(f"{name}-pod", name, node)
    pod = rack.bound_pod(f"{name}-pod")
    assert pod["spec"]["nodeName"] == node
    kubelet = daemon.kubelet(node)
    refs = kubelet.pod_claims(rack.objects, pod)
    return kubelet, refs


def nothing_prepared(daemon: Daemon, node: str) -> bool:
    paths = daemon.paths(node)
    return not list(paths.cdi_dir.iterdir()) and Checkpoint(paths.checkpoint).claims == {}


def allocated_device(rack: Rack, name: str) -> str:
    results = rack.claim(name)["status"]["allocation"]["devices"]["results"]
    assert len(results) == 1
    return str(results[0]["device"])


def test_a_tagged_device_takes_only_its_workloads_claim(daemon: Daemon, rack: Rack) -> None:
    create_claim(rack, "stranger", CHIP, None)
    kubelet, refs = prepare(daemon, rack, "stranger", TAGGED)
    device = allocated_device(rack, "stranger")
    with pytest.raises(KubeletError) as refused:
        kubelet.prepare(refs)
    message = str(refused.value)
    assert (
        f'metadata.labels["{LABEL}"]: device {device!r} of node {TAGGED} belongs to the '
        f'UltraServer workload with workloadId "{WORKLOAD_ID}", and this claim has no {LABEL} '
        "label; to run in that workload, use the ResourceClaimTemplate the UltraServer "
        f"operator generated for that workload (its claims carry the label {LABEL}={WORKLOAD_ID}"
    ) in message, message
    assert nothing_prepared(daemon, TAGGED)

    selector = f'{CHIP} && {ATTRS}.workloadId == "{WORKLOAD_ID}"'  # as the operator's template
    create_claim(rack, "member", selector, WORKLOAD_ID)
    kubelet, refs = prepare(daemon, rack, "member", TAGGED)
    prepared = kubelet.prepare(refs)
    (uid,) = prepared
    assert [d["pool_name"] for d in prepared[uid].devices] == [TAGGED]
    paths = daemon.paths(TAGGED)
    assert set(Checkpoint(paths.checkpoint).claims) == {uid}
    assert len(list(paths.cdi_dir.iterdir())) == 1
    kubelet.unprepare(refs)
    assert nothing_prepared(daemon, TAGGED)

    create_claim(rack, "efas", f'{ATTRS}.resourceType == "efa"', None)
    kubelet, refs = prepare(daemon, rack, "efas", TAGGED)
    assert allocated_device(rack, "efas").startswith("efa")
    assert len(kubelet.prepare(refs)) == 1
    kubelet.unprepare(refs)
    for name in ("efas", "member", "stranger"):
        rack.delete_claim(name, f"{name}-pod")


def test_untagged_devices_take_unlabelled_claims_and_refuse_labelled_ones(
    daemon: Daemon, rack: Rack
) -> None:
    create_claim(rack, "plain", CHIP, None)
    kubelet, refs = prepare(daemon, rack, "plain", UNTAGGED)
    assert len(kubelet.prepare(refs)) == 1
    kubelet.unprepare(refs)

    create_claim(rack, "astray", CHIP, WORKLOAD_ID)
    kubelet, refs = prepare(daemon, rack, "astray", UNTAGGED)
    with pytest.raises(KubeletError, match=f"of node {UNTAGGED} belongs to no workload"):
        kubelet.prepare(refs)
    assert nothing_prepared(daemon, UNTAGGED)
    rack.delete_claim("plain", "plain-pod")
    rack.delete_claim("astray", "astray-pod")
