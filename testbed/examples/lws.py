"""The check of deploy/examples/aws-ultraserver/lws-N-node.yaml, AWS's
UltraServer inference groups as LeaderWorkerSets, on a cluster that runs
LeaderWorkerSet: the stand-in's two Trn3 Gen1 racks (tests/e2e/test_lws.py),
under real kubelets a Trn2 UltraServer (tests/realnodes_aws/test_aws_examples.py,
2-node) and two Trn3 Gen1 racks (tests/realnodes_aws/test_ultraserver_operator.py,
4-node), or kind's one Trn3 Gen1 UltraServer (tests/kind/test_lws_examples.py).
Every pod of a group that has room Running on a node of its own, holding that
node's `neuron_node` device; each group on the nodes of one
`ultraserver-server-id-N` value, no two groups on the same one; and the
environment the node daemon prepared (and, where containers run, what the
container printed) says UltraServer mode N. Where the cluster has fewer such
sets than the file has groups, the groups without room stay unscheduled,
their leader held off the taken sets by the exclusive topology's
anti-affinity."""

from collections import defaultdict
from typing import Final

from kubernetes import client

from driver.jsontypes import JSON
from testbed.examples.target import Target
from testbed.localcluster import Cluster, device_attributes, results, wait_for

DRIVER: Final = "neuron.aws.com"
GROUPS: Final = 2
"""Each file's LeaderWorkerSet has two replicas."""
HELD_OFF: Final = "anti-affinity rules"
"""What the scheduler says of a node that an anti-affinity rules out (the
waiting pod's own, or a running group's)."""
NAME_LABEL: Final = "leaderworkerset.sigs.k8s.io/name"
GROUP_LABEL: Final = "leaderworkerset.sigs.k8s.io/group-index"
START_TIMEOUT: Final = 180.0


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


def held_off(cluster: Cluster, namespace: str, running: set[str]) -> list[JSON]:
    """The pods of the groups without room: none bound to a node, the leaders
    unschedulable, every node ruled out by the anti-affinity (the sets the
    running groups hold)."""

    def probe() -> list[JSON] | None:
        listed = client.CoreV1Api(cluster.api).list_namespaced_pod(
            namespace, label_selector=NAME_LABEL
        )
        pods: list[JSON] = [cluster.api.sanitize_for_serialization(p) for p in listed.items]
        waiting = [p for p in pods if p["metadata"]["labels"][GROUP_LABEL] not in running]
        told = [
            c
            for p in waiting
            for c in p["status"].get("conditions") or []
            if c["type"] == "PodScheduled" and c.get("reason") == "Unschedulable"
        ]
        return waiting if waiting and len(told) == len(waiting) else None

    try:
        waiting = wait_for(f"the groups of {namespace} without room unschedulable", probe)
    except AssertionError as err:
        raise AssertionError(f"{err}\n{story(cluster, namespace)}") from None
    for pod in waiting:
        assert not pod["spec"].get("nodeName"), pod["spec"]["nodeName"]
        [scheduled] = [c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled"]
        assert HELD_OFF in scheduled["message"], scheduled["message"]
    return waiting


def check_groups_hold_whole_nodes_of_their_own_set(
    target: Target, size: int, room: int = GROUPS
) -> None:
    """Apply lws-`size`-node.yaml as it is, check its groups, delete it.
    `room`: how many of its groups the cluster has sets of `size` nodes for."""
    cluster = target.cluster
    file = f"aws-ultraserver/lws-{size}-node.yaml"
    namespace = f"aws-ultraserver-lws-{size}"
    label = f"neuron.amazonaws.com/ultraserver-server-id-{size}"
    try:
        cluster.apply(file)
        pods = running_pods(cluster, namespace, room * size)
        nodes = {n.metadata.name: n for n in client.CoreV1Api(cluster.api).list_node().items}
        on = [p["spec"]["nodeName"] for p in pods]
        assert len(set(on)) == len(pods), on  # a node of its own each

        values_by_group: dict[str, set[str]] = defaultdict(set)
        for pod in pods:
            node = nodes[pod["spec"]["nodeName"]]
            values_by_group[pod["metadata"]["labels"][GROUP_LABEL]].add(node.metadata.labels[label])
        assert len(values_by_group) == room, values_by_group
        assert all(len(values) == 1 for values in values_by_group.values()), values_by_group
        assert len(set.union(*values_by_group.values())) == room, values_by_group
        if room < GROUPS:
            held_off(cluster, namespace, set(values_by_group))

        attributes = device_attributes(cluster.api, DRIVER)
        for pod in pods:
            node = pod["spec"]["nodeName"]
            [result] = results(cluster.claim_of(pod))
            assert (result["pool"], result["device"]) == (node, "neuronnode"), result
            assert attributes[(node, "neuronnode")]["resourceType"] == {"string": "neuron_node"}
            env = target.seen(pod)
            assert env["NEURON_RT_ULTRASERVER_MODE"] == str(size), env
    finally:
        cluster.delete(file)
