"""The checks of deploy/examples/aws-neuron/, each taking the `target` it runs
on: a cluster started with AWS_RACKS, whose standalone trn2.48xlarge nodes the
`instances` checks use and whose Trn2 UltraServer the `ultraserver` ones use.
The stand-in runs them (tests/e2e/test_aws_examples.py) and so do real
kubelets (tests/realnodes_aws/), where the containers print what they got.
pytest collects them where they are imported, by their `test_` names."""

import pytest

from driver.jsontypes import JSON
from testbed.examples.target import Target
from testbed.localcluster import Cluster, device_attributes, results, wait_for

AWS_RACKS = (
    "--profile=aws",
    "--racks=2",
    "--instance-type=trn2.48xlarge,trn2u.48xlarge",
    "--nodes-per-rack=4",
)
"""rack-a: four standalone trn2.48xlarge instances; rack-b: a Trn2 UltraServer of
four trn2u.48xlarge nodes."""
DRIVER = "neuron.aws.com"
GROUP = "resource.aws.com/devicegroup{}_id"


def allocated(cluster: Cluster, pod: JSON) -> list[tuple[str, str, JSON]]:
    """(request, device, its attributes) of the pod's claim, every device on its node."""
    attrs = device_attributes(cluster.api, DRIVER)
    out = []
    for result in results(cluster.claim_of(pod)):
        assert result["pool"] == pod["spec"]["nodeName"], result
        out.append((result["request"], result["device"], attrs[(result["pool"], result["device"])]))
    return out


def one_group(devices: list[tuple[str, str, JSON]], size: int) -> None:
    groups = {a[GROUP.format(size)]["string"] for _, _, a in devices}
    assert len(groups) == 1, groups


def run(target: Target, file: str, namespace: str, pod: str = "train") -> JSON:
    target.apply(f"aws-neuron/{file}")
    return target.cluster.running(namespace, pod)


def test_connected_1x4(instances: Target) -> None:
    try:
        pod = run(instances, "connected-1x4.yaml", "aws-connected-1x4")
        devices = allocated(instances.cluster, pod)
        assert len(devices) == 4 and all(d.startswith("neurondevice") for _, d, _ in devices)
        one_group(devices, 4)
        env = instances.seen(pod)
        assert env["NEURON_LOGICAL_NC_CONFIG"] == "2"  # Trn2's default LNC
        assert len(env["NEURON_RT_VISIBLE_CORES"].split(",")) == 4 * 4
    finally:
        instances.delete("aws-neuron/connected-1x4.yaml")


def test_connected_1x8(instances: Target) -> None:
    try:
        pod = run(instances, "connected-1x8.yaml", "aws-connected-1x8")
        devices = allocated(instances.cluster, pod)
        assert len(devices) == 8
        one_group(devices, 8)
    finally:
        instances.delete("aws-neuron/connected-1x8.yaml")


def test_all_devices_takes_every_chip_of_one_node(instances: Target) -> None:
    try:
        pod = run(instances, "all-devices.yaml", "aws-all-devices")
        devices = allocated(instances.cluster, pod)
        assert sorted(d for _, d, _ in devices) == sorted(f"neurondevice{i}" for i in range(16))
    finally:
        instances.delete("aws-neuron/all-devices.yaml")


def test_lnc_setting_reaches_the_container(instances: Target) -> None:
    try:
        pod = run(instances, "lnc-setting.yaml", "aws-lnc-setting")
        env = instances.seen(pod)
        assert env["NEURON_LOGICAL_NC_CONFIG"] == "1"
        assert env["NEURON_RT_VISIBLE_CORES"] == ",".join(map(str, range(128)))
    finally:
        instances.delete("aws-neuron/lnc-setting.yaml")


def test_a_deployment_on_one_driver_version(instances: Target) -> None:
    try:
        instances.apply("aws-neuron/driver-version.yaml")

        def running() -> JSON | None:
            pods = instances.cluster.kubectl(
                "-n", "aws-driver-version", "get", "pods", "-o", "name"
            ).stdout
            names = [p.removeprefix("pod/") for p in pods.split()]
            found = [instances.cluster.pod("aws-driver-version", n) for n in names]
            live = [p for p in found if p and p["status"].get("phase") == "Running"]
            return live[0] if live else None

        pod = wait_for("the Deployment's pod Running", running)
        devices = allocated(instances.cluster, pod)
        assert len(devices) == 16
        assert {a["neuronDriverVersion"]["string"] for _, _, a in devices} == {"2.25.4.0"}
    finally:
        instances.delete("aws-neuron/driver-version.yaml")


def test_four_chips_and_their_efas_share_a_group(instances: Target) -> None:
    try:
        pod = run(instances, "efa-aligned.yaml", "aws-efa-aligned")
        devices = allocated(instances.cluster, pod)
        neurons = [d for r, d, _ in devices if r == "4-neurons"]
        efas = [d for r, d, _ in devices if r == "4-efas"]
        assert len(neurons) == 4 and all(d.startswith("neurondevice") for d in neurons)
        assert len(efas) == 4 and all(d.startswith("efa") for d in efas)
        one_group(devices, 4)
        env = instances.seen(pod)
        assert len(env["NEURON_RT_VISIBLE_CORES"].split(",")) == 4 * 4  # EFAs add no cores
    finally:
        instances.delete("aws-neuron/efa-aligned.yaml")


@pytest.mark.parametrize(("mode", "lnc"), [(2, "1"), (4, "2")])
def test_ultraserver_modes_give_each_pod_its_whole_node(
    ultraserver: Target, mode: int, lnc: str
) -> None:
    file = f"ultraserver-mode-{mode}.yaml"
    namespace = f"aws-ultraserver-mode-{mode}"
    try:
        ultraserver.apply(f"aws-neuron/{file}")
        pods = [ultraserver.cluster.running(namespace, f"worker-{i}") for i in range(mode)]
        nodes = {p["spec"]["nodeName"] for p in pods}
        assert len(nodes) == mode
        labels = {
            ultraserver.cluster.kubectl(
                "get", "node", n, "-o",
                f"jsonpath={{.metadata.labels.neuron\\.amazonaws\\.com/ultraserver-server-id-{mode}}}",
            ).stdout
            for n in nodes
        }  # fmt: skip
        assert len(labels) == 1, labels
        envs = []
        for pod in pods:
            [(_, device, attrs)] = allocated(ultraserver.cluster, pod)
            assert device == "neuronnode"
            assert attrs["resourceType"] == {"string": "neuron_node"}
            envs.append(ultraserver.seen(pod))
        assert {e["NEURON_RT_ULTRASERVER_MODE"] for e in envs} == {str(mode)}
        assert {e["NEURON_LOGICAL_NC_CONFIG"] for e in envs} == {lnc}
        assert len({e["NEURON_RT_ULTRASERVER_NODE_ID"] for e in envs}) == mode
        assert len({e["NEURON_RT_ULTRASERVER_SERVER_ID"] for e in envs}) == 1
    finally:
        ultraserver.delete(f"aws-neuron/{file}")


def test_bad_aws_configs_are_refused_at_create_with_the_field(instances: Target) -> None:
    api = '"apiVersion": "neuron.aws.com/v1"'
    for parameters, field in (
        (f'{{{api}, "kind": "GpuConfig"}}', "kind: must be one of"),
        (
            f'{{{api}, "kind": "UltraServerConfig", "ultraserverMode": 3}}',
            "ultraserverMode: must be one of 1, 2, 4, got 3",
        ),
        (
            f'{{{api}, "kind": "NeuronConfig", "logicalNeuronCore": 3}}',
            "logicalNeuronCore: must be one of 1, 2, 4, got 3",
        ),
    ):
        claim = (
            '{"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": '
            '{"name": "bad", "namespace": "default"}, "spec": {"devices": {"requests": '
            '[{"name": "n", "exactly": {"deviceClassName": "neuron.aws.com"}}], "config": '
            f'[{{"opaque": {{"driver": "neuron.aws.com", "parameters": {parameters}}}}}]}}}}}}'
        )
        done = instances.cluster.kubectl("create", "-f", "-", check=False, stdin=claim)
        assert done.returncode != 0
        assert f"spec.devices.config[0].opaque.parameters.{field}" in done.stderr, done.stderr
