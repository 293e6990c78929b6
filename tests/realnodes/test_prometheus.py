"""`trainium-dra up --real-nodes --with-prometheus`: the host's Prometheus
scrapes the chart's pods (found through the apiserver) and the kubelets, with
its own ServiceAccount's token. Every value asserted here is read from
Prometheus's HTTP API, i.e. from what it scraped."""

import json
import stat
import time
from pathlib import Path

import pytest

from localsim.prometheus import CONTROLLER_JOB, NODE_JOB, query
from localsim.realnodes.prometheus import KUBELET_JOB
from testbed.localcluster import wait_for
from testbed.realnodes import (
    DRIVER,
    NAMESPACE,
    RealCluster,
    claim_template,
    namespace,
    workload_pod,
)

pytestmark = pytest.mark.integration

NODE = "rack-a-node-2"
NS = "real-prometheus"
PREPARE = ".*/NodePrepareResources"
"""Any version of the kubelet's DRA gRPC service (the release picks it)."""
GRPC_PREPARES = (
    f'dra_grpc_operations_duration_seconds_count{{job="{KUBELET_JOB}",node="{NODE}",'
    f'driver_name="{DRIVER}",method_name=~"{PREPARE}"}}'
)
STEP_PREPARES = (
    f'dra_operations_duration_seconds_count{{job="{KUBELET_JOB}",node="{NODE}",'
    'operation_name="PrepareResources"}'
)
SCRAPE_WAIT = 60.0
WORK = '{"kind": "train-step", "hidden": 1024, "seq": 512, "layers": 1, "iterations": 1000000}'
"""Runs until the namespace is deleted, so the pod stays Running."""


def prometheus_url(real: RealCluster) -> str:
    record = json.loads(real.cluster.paths.cluster_file.read_text())
    assert "prometheus" in record, "the real-node cluster runs without --with-prometheus"
    url: str = record["prometheus"]
    return url


def values(url: str, expr: str, label: str) -> dict[str, float]:
    return {s["metric"].get(label, ""): float(s["value"][1]) for s in query(url, expr)}


def scalar(url: str, expr: str) -> float:
    """The sum of `expr`'s samples, 0 when it has none (a counter not yet created)."""
    found = query(url, f"sum({expr})")
    return float(found[0]["value"][1]) if found else 0.0


def scraped_after(url: str, selector: str, moment: float) -> bool:
    """Whether every target of `selector` has been scraped since `moment`."""
    stamps = values(url, f"timestamp(up{{{selector}}})", "instance")
    return bool(stamps) and min(stamps.values()) > moment


def test_targets_are_up_with_metrics_from_every_node(real: RealCluster) -> None:
    url = prometheus_url(real)
    nodes = set(real.nodes)

    def daemons_of_every_node() -> dict[str, float] | None:
        found = values(url, f'neuron_hardware_info{{job="{NODE_JOB}"}}', "node")
        return found if set(found) == nodes else None

    wait_for("node daemon series of every node", daemons_of_every_node, SCRAPE_WAIT)
    pods = {p["metadata"]["name"] for p in real.daemon_pods()}
    up_daemons = values(url, f'up{{job="{NODE_JOB}"}} == 1', "pod")
    assert set(up_daemons) == pods, up_daemons

    def kubelets_up() -> dict[str, float] | None:
        found = values(url, f'up{{job="{KUBELET_JOB}"}} == 1', "node")
        return found if set(found) == nodes else None

    wait_for("every kubelet scraped", kubelets_up, SCRAPE_WAIT)
    leader = values(url, f'trainium_dra_controller_leader{{job="{CONTROLLER_JOB}"}}', "pod")
    assert list(leader.values()) == [1.0], leader
    for job in ("kube-apiserver", "kube-controller-manager", "kube-scheduler"):
        assert values(url, f'up{{job="{job}"}}', "job") == {job: 1.0}, job


def test_kubelet_prepare_histograms_count_a_claim(real: RealCluster) -> None:
    url = prometheus_url(real)
    moment = time.time()
    wait_for(
        f"a scrape of {NODE}'s kubelet after the test began",
        lambda: scraped_after(url, f'job="{KUBELET_JOB}",node="{NODE}"', moment),
        SCRAPE_WAIT,
    )
    grpc_before = scalar(url, GRPC_PREPARES)
    step_before = scalar(url, STEP_PREPARES)

    real.apply(namespace(NS), claim_template(NS, "chip", "chip.trainium.sim.dev"))
    real.apply(workload_pod(NS, "probe", "chip", ("--spec", WORK), node=NODE))
    real.running(NS, "probe")

    wait_for(
        "the kubelet's prepare count to go up in Prometheus",
        lambda: scalar(url, GRPC_PREPARES) > grpc_before or None,
        SCRAPE_WAIT,
    )
    assert scalar(url, GRPC_PREPARES) == grpc_before + 1
    assert scalar(url, STEP_PREPARES) >= step_before + 1
    every = GRPC_PREPARES.replace("_count{", '_bucket{le="+Inf",')
    buckets = values(url, f"sum by (le) ({every})", "le")
    assert buckets == {"+Inf": grpc_before + 1}, buckets

    claims = f'trainium_dra_node_prepared_claims{{job="{NODE_JOB}",node="{NODE}"}}'
    wait_for("the daemon's prepared claim in Prometheus", lambda: scalar(url, claims) >= 1)
    real.kubectl("delete", "namespace", NS, "--wait=false")


def test_a_replaced_daemon_pod_is_scraped(real: RealCluster) -> None:
    url = prometheus_url(real)
    old = real.daemon_pod(NODE)["metadata"]["name"]
    real.kubectl("-n", NAMESPACE, "delete", "pod", old, "--wait=true", "--timeout=60s")

    def new_pod_up() -> dict[str, float] | None:
        up = values(url, f'up{{job="{NODE_JOB}"}} == 1', "pod")
        return up if old not in up and len(up) == len(real.nodes) else None

    up = wait_for("the new daemon pod scraped in place of the old", new_pod_up, 120.0)
    assert real.daemon_pod(NODE)["metadata"]["name"] in up


def test_the_token_is_private_and_not_the_admin(real: RealCluster) -> None:
    token = real.cluster.paths.root / "prometheus" / "token"
    assert stat.S_IMODE(token.stat().st_mode) == 0o600
    assert stat.S_IMODE(token.parent.stat().st_mode) == 0o700
    admin = Path(real.cluster.paths.kubeconfig).read_text()
    assert token.read_text().strip() not in admin
    review = real.kubectl(
        "auth", "can-i", "--list", "--as=system:serviceaccount:trainium-dra-monitoring:prometheus"
    )
    assert "secrets" not in review and "pods/proxy" not in review, review
