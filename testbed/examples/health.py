"""Per-core health: a fault on one core taints only the devices over it
(deploy/examples/core-fault), on the stand-in here and, through `target`, on
real nodes (tests/realnodes/test_examples.py)."""

from kubernetes import client

from driver.jsontypes import JSON
from testbed.examples.target import Target
from testbed.localcluster import Cluster, wait_for

NAMESPACE = "example-core-fault"
NODE = "rack-a-node-2"
FAULT = {"node": NODE, "chip": 3, "core": 6, "kind": "ecc-uncorrected-sram"}
OVER_CORE_6 = {
    "server02-chip03-core6",
    "server02-chip03-cores6-7",
    "server02-chip03-cores4-7",
    "server02-chip03",
    "server02",
    "ultraserver",
}


def tainted(cluster: Cluster) -> set[str]:
    slices = client.ResourceV1Api(cluster.api).list_resource_slice().items
    return {
        d.name
        for s in slices
        if s.spec.pool.name == "rack-a"
        for d in s.spec.devices or []
        if any(t.key == "trainium.sim.dev/unhealthy" for t in d.taints or [])
    }


def health_entries(cluster: Cluster) -> list[JSON]:
    report = client.CustomObjectsApi(cluster.api).get_cluster_custom_object(
        "trainium.sim.dev", "v1alpha1", "nodedevicehealths", NODE
    )
    entries: list[JSON] = report["spec"].get("devices") or []
    return entries


def test_a_failed_core_evicts_only_the_partition_over_it(target: Target) -> None:
    files = ("core-fault/core-fault.yaml",)
    cluster = target.cluster
    sim = target.sim_control(NODE)
    target.apply(*files)
    try:
        for name in ("low", "high"):
            target.seen(cluster.running(NAMESPACE, name))
        sim.post("/sim/v1/faults", json=FAULT).raise_for_status()
        [entry] = wait_for("the core in NodeDeviceHealth", lambda: health_entries(cluster))
        assert (entry["chip"], entry.get("core"), entry["state"]) == (3, 6, "failed")
        wait_for("exactly the devices over core 6 tainted", lambda: tainted(cluster) == OVER_CORE_6)
        wait_for("high evicted", lambda: cluster.pod(NAMESPACE, "high") is None)
        low = cluster.pod(NAMESPACE, "low")
        assert low is not None and low["status"]["phase"] == "Running"
        sim.request("DELETE", "/sim/v1/faults", json=FAULT).raise_for_status()
        wait_for("the taints gone", lambda: not tainted(cluster))
    finally:
        sim.request("DELETE", "/sim/v1/faults", json=FAULT)
        sim.close()
        target.delete(*files)
