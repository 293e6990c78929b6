"""deploy/examples/aws-ultraserver/ on a cluster started with `--with-lws`:
AWS's UltraServer inference groups as LeaderWorkerSets, applied one after the
other to two Trn3 Gen1 racks under the AWS profile. Every pod Running on a
node of its own, holding that node's `neuron_node` device; each group on the
nodes of one `ultraserver-server-id-N` value, no two groups on the same one;
and the environment the node daemon prepared says UltraServer mode N."""

from collections import defaultdict
from collections.abc import Iterator

import pytest
from kubernetes import client

from driver.jsontypes import JSON
from testbed.localcluster import (
    Cluster,
    device_attributes,
    results,
    running_cluster,
    wait_for,
)

pytestmark = pytest.mark.integration

CLUSTER = ("--profile=aws", "--racks=2", "--generation=trn3-gen1", "--with-lws")
"""8 trn3.48xlarge nodes: four `-2` pairs and two `-4` quads (the README's cluster)."""
DRIVER = "neuron.aws.com"
GROUPS = 2
"""Each file's LeaderWorkerSet has two replicas."""
NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"
GROUP_LABEL = "leaderworkerset.sigs.k8s.io/group-index"
START_TIMEOUT = 180.0


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with running_cluster(*CLUSTER) as running:
        yield running


def story(cluster: Cluster, namespace: str) -> str:
    """The LeaderWorkerSet's pods and the namespace's events, for a failed wait."""
    core = client.CoreV1Api(cluster.api)
    lines = [f"pods of {namespace}:"]
    for pod in core.list_namespaced_pod(namespace).items:
        conditions = ", ".join(
            f"{c.type}={c.status}" + (f" ({c.message})" if c.message else "")
            for c in pod.status.conditions or []
        )
        lines.append(
            f"  {pod.metadata.name}: {pod.status.phase} on {pod.spec.node_name}; {conditions}"
        )
    lines.append(f"events of {namespace}:")
    for event in core.list_namespaced_event(namespace).items:
        lines.append(f"  {event.involved_object.kind}/{event.involved_object.name} {event.message}")
    return "\n".join(lines)


def running_pods(cluster: Cluster, namespace: str, count: int) -> list[JSON]:
    def probe() -> list[JSON] | None:
        listed = client.CoreV1Api(cluster.api).list_namespaced_pod(
            namespace, label_selector=NAME_LABEL
        )
        pods: list[JSON] = [cluster.api.sanitize_for_serialization(p) for p in listed.items]
        running = [p for p in pods if p["status"].get("phase") == "Running"]
        return running if len(running) == count else None

    try:
        return wait_for(f"{count} pods of {namespace} Running", probe, timeout=START_TIMEOUT)
    except AssertionError as err:
        raise AssertionError(f"{err}\n{story(cluster, namespace)}") from None


@pytest.mark.parametrize("size", [2, 4])
def test_each_group_holds_whole_nodes_of_its_own_ultraserver_set(
    cluster: Cluster, size: int
) -> None:
    file = f"aws-ultraserver/lws-{size}-node.yaml"
    namespace = f"aws-ultraserver-lws-{size}"
    label = f"neuron.amazonaws.com/ultraserver-server-id-{size}"
    try:
        cluster.apply(file)
        pods = running_pods(cluster, namespace, GROUPS * size)
        nodes = {n.metadata.name: n for n in client.CoreV1Api(cluster.api).list_node().items}
        on = [p["spec"]["nodeName"] for p in pods]
        assert len(set(on)) == len(pods), on  # a node of its own each

        values_by_group: dict[str, set[str]] = defaultdict(set)
        for pod in pods:
            node = nodes[pod["spec"]["nodeName"]]
            values_by_group[pod["metadata"]["labels"][GROUP_LABEL]].add(node.metadata.labels[label])
        assert len(values_by_group) == GROUPS, values_by_group
        assert all(len(values) == 1 for values in values_by_group.values()), values_by_group
        assert len(set.union(*values_by_group.values())) == GROUPS, values_by_group

        attributes = device_attributes(cluster.api, DRIVER)
        for pod in pods:
            node = pod["spec"]["nodeName"]
            claim = cluster.claim_of(pod)
            [result] = results(claim)
            assert (result["pool"], result["device"]) == (node, "neuronnode"), result
            assert attributes[(node, "neuronnode")]["resourceType"] == {"string": "neuron_node"}
            env = cluster.cdi_env(node, claim["metadata"]["uid"])
            assert env["NEURON_RT_ULTRASERVER_MODE"] == str(size), env
    finally:
        cluster.delete(file)
