"""The scheduling examples (docs/scheduling.md) against the real scheduler:
gangs in PodGroups, extended resource requests served through DRA, and a
ResourceQuota on devices. On the stand-in here and, through `target`, on real
nodes (tests/realnodes/test_examples.py)."""

import re

from kubernetes import client

from driver.jsontypes import JSON
from testbed.examples.target import Target
from testbed.localcluster import EXAMPLES, Cluster, results, wait_for

GROUP_REF = {"apiGroup": "scheduling.k8s.io", "resource": "podgroups"}


def podgroup(cluster: Cluster, namespace: str, name: str) -> JSON:
    group, version = cluster.release.podgroup_api.split("/")
    found: JSON = client.CustomObjectsApi(cluster.api).get_namespaced_custom_object(
        group, version, namespace, "podgroups", name
    )
    return found


def scheduled_condition(cluster: Cluster, group: JSON) -> JSON | None:
    """The condition the scheduler sets once the gang is placed (its name
    depends on the release)."""
    conditions = (group.get("status") or {}).get("conditions") or []
    kind = cluster.release.podgroup_scheduled_condition
    return next((c for c in conditions if c["type"] == kind), None)


def pods(cluster: Cluster, namespace: str) -> list[JSON]:
    items = client.CoreV1Api(cluster.api).list_namespaced_pod(namespace).items
    return [cluster.api.sanitize_for_serialization(p) for p in items]


def test_whole_rack_gang_binds_all_or_nothing(target: Target) -> None:
    files = ("gang-rack/gang-rack.yaml",)
    namespace = "example-gang-rack"
    cluster, servers = target.cluster, target.rack.servers
    blocked = target.node(5)
    cluster.kubectl("cordon", blocked)
    try:
        target.apply(*files)

        def refused() -> JSON | None:
            condition = scheduled_condition(cluster, podgroup(cluster, namespace, "rack-train"))
            return condition if condition and condition["status"] == "False" else None

        condition = wait_for("the gang's scheduled condition False", refused)
        assert condition["reason"] == "Unschedulable"
        assert condition["message"], condition
        waiting = pods(cluster, namespace)
        assert len(waiting) == servers
        assert [p["metadata"]["name"] for p in waiting if p["spec"].get("nodeName")] == []
        claim_name = podgroup(cluster, namespace, "rack-train")["status"]["resourceClaimStatuses"][
            0
        ]["resourceClaimName"]

        cluster.kubectl("uncordon", blocked)
        running = cluster.job_pods(namespace, "rack-train", servers)
        assert {p["spec"]["nodeName"] for p in running} == {target.node(i) for i in range(servers)}
        scheduled = scheduled_condition(cluster, podgroup(cluster, namespace, "rack-train"))
        assert scheduled and scheduled["status"] == "True"
        claim = cluster.claim_of(running[0])
        assert claim["metadata"]["name"] == claim_name
        assert [r["device"] for r in results(claim)] == ["ultraserver"]
        # Reserved once for the group, not 36 times for its pods.
        [reserved] = claim["status"]["reservedFor"]
        assert {k: reserved[k] for k in GROUP_REF} == GROUP_REF
        assert reserved["name"] == "rack-train"
        [status] = claim["status"]["devices"]
        assert status["data"]["ring"] == list(range(target.rack.chips))
        for pod in running:
            env = target.seen(pod)
            # What the containers see of the fabric is what the claim's status says.
            assert env["TRAINIUM_DRA_RING"] == ",".join(map(str, status["data"]["ring"]))
            assert env["TRAINIUM_DRA_FABRIC_IPS"] == ",".join(status["networkData"]["ips"])
            assert env["NEURON_LOGICAL_NC_CONFIG"] == "2"
            fused = range(target.server_cores // 2)
            assert env["NEURON_RT_VISIBLE_CORES"] == ",".join(map(str, fused))
    finally:
        cluster.kubectl("uncordon", blocked, check=False)
        target.delete(*files)


def test_four_server_gang_on_one_rack(target: Target) -> None:
    files = ("gang-servers/gang-servers.yaml",)
    namespace = "example-gang-servers"
    cluster = target.cluster
    target.apply(*files)
    try:
        running = cluster.job_pods(namespace, "four-servers", 4)
        nodes = {p["spec"]["nodeName"] for p in running}
        assert len(nodes) == 4
        devices = set()
        for pod in running:
            [result] = results(cluster.claim_of(pod))
            match = re.fullmatch(r"server(\d\d)", result["device"])
            assert match, result["device"]
            assert pod["spec"]["nodeName"] == target.node(int(match[1]))
            assert len(target.seen(pod)["NEURON_RT_VISIBLE_CORES"].split(",")) == (
                target.server_cores
            )
            devices.add(result["pool"])
        assert devices == {"rack-a"}
        group = podgroup(cluster, namespace, "four-servers")
        condition = scheduled_condition(cluster, group)
        assert condition and condition["status"] == "True"
        if cluster.release.minor != "1.36":
            # Stored, so the scheduler's topology placement saw it (1.36 has no such field).
            assert group["spec"]["schedulingConstraints"] == {
                "topology": [{"key": "trainium.sim.dev/ultraserver"}]
            }
    finally:
        target.delete(*files)


def test_extended_resource_requests_are_served_by_dra(target: Target) -> None:
    files = ("extended-resources/extended-resources.yaml",)
    namespace = "example-extended-resources"
    cluster = target.cluster
    target.apply(*files)
    try:
        for name, pattern, visible in (
            ("two-cores", r"server\d\d-chip\d\d-core\d", 2),
            ("one-chip", r"server\d\d-chip\d\d", 8),
        ):
            pod = cluster.running(namespace, name)
            assert not pod["spec"].get("resourceClaims")
            extended = pod["status"]["extendedResourceClaimStatus"]
            [mapping] = extended["requestMappings"]
            assert mapping["containerName"] == "main"
            claim = target.claim_of(pod)
            assert claim["metadata"]["name"] == extended["resourceClaimName"]
            found = results(claim)
            assert all(re.fullmatch(pattern, r["device"]) for r in found), found
            assert len(found) == (2 if name == "two-cores" else 1)
            assert len(target.seen(pod)["NEURON_RT_VISIBLE_CORES"].split(",")) == visible
    finally:
        target.delete(*files)


def test_the_binpack_profile_puts_core_requests_on_the_fullest_node(target: Target) -> None:
    """The chart's profile, served by the local cluster's scheduler: four
    4-core pods share one server where the default profile scores every
    server alike."""
    files = ("binpack/binpack.yaml",)
    namespace = "example-binpack"
    cluster = target.cluster
    busy = {
        p.spec.node_name
        for p in client.CoreV1Api(cluster.api).list_pod_for_all_namespaces().items
        if p.spec.node_name and p.status.phase in ("Pending", "Running")
    }
    target.apply(*files)
    try:
        pods = [cluster.running(namespace, n) for n in ("first", "second", "third", "fourth")]
        nodes = {p["spec"]["nodeName"] for p in pods}
        assert len(nodes) == 1, (nodes, busy)
        for pod in pods:
            target.seen(pod)
    finally:
        target.delete(*files)


def test_quota_refuses_the_fifth_core(target: Target) -> None:
    files = ("core-quota/1-quota.yaml", "core-quota/2-four-cores.yaml")
    namespace = "example-core-quota"
    cluster = target.cluster
    target.apply(files[0])
    try:

        def counted() -> JSON | None:
            quota = client.CoreV1Api(cluster.api).read_namespaced_resource_quota("cores", namespace)
            return quota.status.hard or None

        wait_for("the quota's status (the quota controller)", counted)
        target.apply(files[1])
        fifth = cluster.kubectl(
            "apply", "-f", str(EXAMPLES / "core-quota/3-fifth-core.yaml"), check=False
        )
        assert fifth.returncode != 0
        assert "exceeded quota: cores" in fifth.stderr, fifth.stderr
        assert "neuroncore.trainium.sim.dev.deviceclass.resource.k8s.io/devices=1" in fifth.stderr
        names = {
            c.metadata.name
            for c in client.ResourceV1Api(cluster.api)
            .list_namespaced_resource_claim(namespace)
            .items
        }
        assert names == {f"core-{i}" for i in range(4)}
    finally:
        target.delete(*files)


def set_fabric(cluster: Cluster, fabric: JSON | None) -> None:
    client.CustomObjectsApi(cluster.api).patch_cluster_custom_object(
        "trainium.sim.dev", "v1alpha1", "ultraservers", "rack-a", {"spec": {"fabric": fabric}}
    )


def fabric_states(cluster: Cluster, namespace: str, claim: str) -> dict[str, str]:
    found = client.ResourceV1Api(cluster.api).read_namespaced_resource_claim(claim, namespace)
    entries = cluster.api.sanitize_for_serialization(found)["status"].get("devices") or []
    return {c["type"]: c["status"] for e in entries for c in e.get("conditions") or []}


def test_a_server_binds_after_its_fabric_and_not_while_it_fails(target: Target) -> None:
    files = ("fabric-readiness/fabric-readiness.yaml",)
    namespace = "example-fabric-readiness"
    cluster = target.cluster
    set_fabric(cluster, {"failedServers": [3]})
    try:
        target.apply(*files)
        wait_for(
            "FabricFailed=True in the claim's status",
            lambda: fabric_states(cluster, namespace, "server3").get("FabricFailed") == "True",
        )
        wait_for(
            "the scheduler's binding failure",
            lambda: any(
                "device binding failed" in (e.get("message") or "")
                for e in cluster.events(namespace, "train")
            ),
        )
        pod = cluster.pod(namespace, "train")
        assert pod is not None and not pod["spec"].get("nodeName")
    finally:
        set_fabric(cluster, None)
    try:
        pod = cluster.running(namespace, "train")
        assert pod["spec"]["nodeName"] == target.node(3)
        assert any(
            e["reason"] == "BindingConditionsPending" for e in cluster.events(namespace, "train")
        )
        claim = cluster.claim_of(pod)
        [status] = claim["status"]["devices"]
        assert fabric_states(cluster, namespace, "server3") == {
            "FabricReady": "True",
            "FabricFailed": "False",
        }
        per_server = target.rack.chips_per_server
        ring = list(range(3 * per_server, 4 * per_server))
        assert status["data"]["ring"] == ring
        assert status["networkData"]["interfaceName"] == "neuronlink0"
        env = target.seen(pod)
        assert env["TRAINIUM_DRA_RING"] == ",".join(map(str, ring))
        assert env["TRAINIUM_DRA_FABRIC_IPS"] == ",".join(status["networkData"]["ips"])
    finally:
        target.delete(*files)
