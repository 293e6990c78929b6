"""Kueue in front of the scheduler: the default queues of `up --with-kueue` and
each deploy/examples/kueue-* example (testbed/examples/kueue.py, which the kind
lane runs too), on one full-rack local cluster (started with Prometheus too,
for Kueue's metrics), checked as its README says."""

import contextlib
import functools
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from driver.jsontypes import JSON
from localsim.kueue.queues import CLUSTER_QUEUE, LOCAL_QUEUE, LOCAL_QUEUE_NAMESPACE
from localsim.prometheus import query
from simdevice.topology import rack_spec
from testbed.examples.kueue import (
    test_a_team_borrows_and_the_lender_reclaims,
    test_high_priority_rack_job_preempts_low_jobs,
    test_kueue_refuses_claims_it_cannot_count,
    test_rack_gang_is_admitted_whole_and_not_overtaken,
    test_team_quota_admits_jobs_up_to_its_cores,
)
from testbed.examples.target import Target, rack_of
from testbed.kueue import (
    QUIET,
    admitted,
    cluster_queue,
    device_claim,
    is_true,
    running_pods,
    workloads,
)
from testbed.localcluster import Cluster, results, running_cluster, wait_for

pytestmark = pytest.mark.integration

__all__ = [
    "test_a_team_borrows_and_the_lender_reclaims",
    "test_high_priority_rack_job_preempts_low_jobs",
    "test_kueue_refuses_claims_it_cannot_count",
    "test_rack_gang_is_admitted_whole_and_not_overtaken",
    "test_team_quota_admits_jobs_up_to_its_cores",
]

ROOT = Path(__file__).resolve().parents[2]
RACK = rack_spec("trn3-gen2")


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with running_cluster("--with-kueue", "--with-prometheus") as running:
        yield running


@pytest.fixture
def target(cluster: Cluster) -> Target:
    """The examples' checks run on the stand-in rack (no simulator controls needed)."""
    return Target(cluster, rack_of(cluster), lambda node: cluster.sim_control(), False)


CHIP_CONTAINER: JSON = {
    "name": "main",
    "image": "localhost/trainium-dra/driver:dev",
    "resources": {"limits": {"aws.amazon.com/neuron": 1}},
}
"""One chip by extended resource name, as the Job and the pod group below ask."""
ONE_CHIP: JSON = {
    "apiVersion": "batch/v1",
    "kind": "Job",
    "metadata": {
        "name": "one-chip",
        "namespace": LOCAL_QUEUE_NAMESPACE,
        "labels": {"kueue.x-k8s.io/queue-name": LOCAL_QUEUE},
    },
    "spec": {
        "template": {
            "spec": {
                "restartPolicy": "Never",
                "containers": [CHIP_CONTAINER],
            }
        }
    },
}
"""A one-chip Job for the default LocalQueue."""


@contextlib.contextmanager
def one_chip_job(cluster: Cluster) -> Iterator[None]:
    cluster.kubectl("apply", "-f", "-", stdin=json.dumps(ONE_CHIP))
    try:
        yield
    finally:
        name, namespace = ONE_CHIP["metadata"]["name"], ONE_CHIP["metadata"]["namespace"]
        cluster.kubectl("delete", "job", name, "-n", namespace, "--cascade=foreground", "--wait")


def test_default_queue_holds_the_whole_rack_and_admits_a_job(cluster: Cluster) -> None:
    quota = {
        r["name"]: r["nominalQuota"]
        for r in cluster_queue(cluster, CLUSTER_QUEUE)["spec"]["resourceGroups"][0]["flavors"][0][
            "resources"
        ]
    }
    assert quota["aws.amazon.com/neuroncore"] == str(
        RACK.servers * RACK.chips_per_server * RACK.chip.cores
    )
    assert quota["aws.amazon.com/neuron"] == str(RACK.servers * RACK.chips_per_server)
    with one_chip_job(cluster):
        [pod] = running_pods(cluster, LOCAL_QUEUE_NAMESPACE, ONE_CHIP["metadata"]["name"], 1)
        assert len(results(device_claim(cluster, pod))) == 1
        assert admitted(cluster, LOCAL_QUEUE_NAMESPACE) == {ONE_CHIP["metadata"]["name"]}


def delete_plain_pod(cluster: Cluster, namespace: str, name: str) -> None:
    """Delete a plain pod Kueue manages. Kueue keeps its finalizer until the
    pod reports a terminal phase, which the kubelet stand-in does not write
    before it removes a deleted pod: the finalizer goes by hand, as
    docs/queues.md says."""
    cluster.kubectl("delete", "pod", name, "-n", namespace, "--wait=false", check=False)
    patch = '[{"op": "remove", "path": "/metadata/finalizers"}]'
    cluster.kubectl("patch", "pod", name, "-n", namespace, "--type=json", "-p", patch, check=False)
    wait_for(f"pod {namespace}/{name} gone", lambda: cluster.pod(namespace, name) is None)


def group_pod(name: str) -> JSON:
    """One pod of the plain-pod group `pair` (two pods), a chip each."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": LOCAL_QUEUE_NAMESPACE,
            "labels": {
                "kueue.x-k8s.io/queue-name": LOCAL_QUEUE,
                "kueue.x-k8s.io/pod-group-name": "pair",
            },
            "annotations": {"kueue.x-k8s.io/pod-group-total-count": "2"},
        },
        "spec": {
            "restartPolicy": "Never",
            "containers": [CHIP_CONTAINER],
        },
    }


def test_a_pod_group_is_admitted_once_all_its_pods_exist(cluster: Cluster) -> None:
    cluster.kubectl("apply", "-f", "-", stdin=json.dumps(group_pod("pair-0")))
    try:
        deadline = time.monotonic() + QUIET
        while time.monotonic() < deadline:
            pod = cluster.pod(LOCAL_QUEUE_NAMESPACE, "pair-0")
            assert pod is not None
            assert {"name": "kueue.x-k8s.io/admission"} in pod["spec"]["schedulingGates"], pod
            time.sleep(0.5)
        cluster.kubectl("apply", "-f", "-", stdin=json.dumps(group_pod("pair-1")))
        for name in ("pair-0", "pair-1"):
            pod = cluster.running(LOCAL_QUEUE_NAMESPACE, name)
            assert len(results(device_claim(cluster, pod))) == 1
        group = workloads(cluster, LOCAL_QUEUE_NAMESPACE)
        assert group["pair-0"]["metadata"]["name"] == group["pair-1"]["metadata"]["name"]
        assert is_true(group["pair-0"], "Admitted")
    finally:
        for name in ("pair-0", "pair-1"):
            delete_plain_pod(cluster, LOCAL_QUEUE_NAMESPACE, name)


def test_prometheus_scrapes_kueue_and_the_dashboard_panel_has_data(cluster: Cluster) -> None:
    url = json.loads(cluster.paths.cluster_file.read_text()).get("prometheus")
    assert url, "cluster.json names no Prometheus"
    wait_for(
        "Kueue's target up",
        lambda: query(url, 'up{job="kueue"} == 1'),
    )
    document = json.loads(
        (ROOT / "charts/trainium-dra/dashboards/trainium-allocations.json").read_text()
    )
    exprs = [
        target["expr"]
        for panel in document["panels"]
        for target in panel.get("targets", [])
        if "kueue_" in target["expr"]
    ]
    assert exprs
    admitted_here = f'kueue_admitted_active_workloads{{cluster_queue="{CLUSTER_QUEUE}"}} == 1'

    def of_default_queue(expr: str) -> list[JSON]:
        return [s for s in query(url, expr) if s["metric"].get("cluster_queue") == CLUSTER_QUEUE]

    with one_chip_job(cluster):
        wait_for("Prometheus counting the admitted Job", lambda: query(url, admitted_here))
        for expr in exprs:
            wait_for(f"{expr}: the default queue", functools.partial(of_default_queue, expr))
