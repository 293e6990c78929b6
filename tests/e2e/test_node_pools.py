"""The node pool layout end to end on the local cluster (`trainium-dra up
--pools node`, one Trn3 Gen1 rack): the node daemon prepares a core from a
server's pool and the whole rack from the rack's pool, the guard keeps them
apart, and the containers' fabric addresses are the ones the controller
writes into the claim's status."""

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from testbed.localcluster import Cluster, results, running_cluster, wait_for

pytestmark = pytest.mark.integration

NS = "node-pools"


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with running_cluster("--generation", "trn3-gen1", "--pools", "node") as running:
        yield running


def claim_and_pod(name: str, device_class: str) -> list[dict[str, object]]:
    return [
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": NS},
            "spec": {
                "devices": {
                    "requests": [{"name": "r", "exactly": {"deviceClassName": device_class}}]
                }
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": NS},
            "spec": {
                "containers": [
                    {
                        "name": "main",
                        "image": "registry.invalid/trainium-workload:none",
                        "resources": {"claims": [{"name": "r"}]},
                    }
                ],
                "resourceClaims": [{"name": "r", "resourceClaimName": name}],
                "terminationGracePeriodSeconds": 0,
            },
        },
    ]


def apply(cluster: Cluster, tmp_path: Path, objects: list[dict[str, object]]) -> None:
    path = tmp_path / "objects.yaml"
    path.write_text(yaml.safe_dump_all(objects))
    cluster.kubectl("apply", "-f", str(path))


def test_core_then_rack_from_node_pools(cluster: Cluster, tmp_path: Path) -> None:
    apply(cluster, tmp_path, [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}])
    apply(cluster, tmp_path, claim_and_pod("one-core", "core.trainium.sim.dev"))
    core_pod = cluster.running(NS, "one-core")
    [core] = results(cluster.claim_of(core_pod))
    assert core["pool"].startswith("rack-a/server")
    env = cluster.cdi_env(
        core_pod["spec"]["nodeName"], cluster.claim_of(core_pod)["metadata"]["uid"]
    )
    assert len(env["NEURON_RT_VISIBLE_CORES"].split(",")) == 1

    apply(cluster, tmp_path, claim_and_pod("whole-rack", "ultraserver.trainium.sim.dev"))
    message = wait_for(
        "the rack pod held back while a core is taken",
        lambda: next(
            (
                c.get("message")
                for c in (cluster.pod(NS, "whole-rack") or {}).get("status", {}).get("conditions")
                or []
                if c["type"] == "PodScheduled" and c["status"] == "False"
            ),
            None,
        ),
    )
    assert message
    assert not (cluster.pod(NS, "whole-rack") or {})["spec"].get("nodeName")

    cluster.kubectl("delete", "pod", "-n", NS, "one-core", "--wait", "--timeout=120s")
    cluster.kubectl("delete", "resourceclaim", "-n", NS, "one-core", "--wait", "--timeout=120s")
    rack_pod = cluster.running(NS, "whole-rack")
    claim = cluster.claim_of(rack_pod)
    [rack] = results(claim)
    assert (rack["pool"], rack["device"]) == ("rack-a", "ultraserver")
    [status] = claim["status"]["devices"]
    conditions = {c["type"]: c["status"] for c in status["conditions"]}
    assert conditions["RackExclusive"] == "True"
    env = cluster.cdi_env(rack_pod["spec"]["nodeName"], claim["metadata"]["uid"])
    assert env["TRAINIUM_DRA_FABRIC_IPS"].split(",") == status["networkData"]["ips"]
    cluster.kubectl("delete", "namespace", NS, "--wait", "--timeout=180s")
