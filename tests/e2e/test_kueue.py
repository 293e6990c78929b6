"""Kueue in front of the scheduler: the default queues of `up --with-kueue` and
each deploy/examples/kueue-* example, on one full-rack local cluster (started
with Prometheus too, for Kueue's metrics), checked as its README says."""

import contextlib
import functools
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client

from driver.jsontypes import JSON
from driver.localsim.kueue.queues import CLUSTER_QUEUE, LOCAL_QUEUE, LOCAL_QUEUE_NAMESPACE
from driver.localsim.prometheus import query
from simdevice.topology import rack_spec
from testbed.kueue import (
    admitted,
    cluster_queue,
    condition,
    device_claim,
    is_true,
    pods_of_job,
    workloads,
)
from testbed.localcluster import Cluster, results, running_cluster, wait_for

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
RACK = rack_spec("trn3-gen2")
QUIET = 5.0
"""How long a Workload must stay unadmitted to count as held back."""


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with running_cluster("--with-kueue", "--with-prometheus") as running:
        yield running


def running_pods(cluster: Cluster, namespace: str, job: str, count: int) -> list[JSON]:
    def probe() -> list[JSON] | None:
        pods = [
            p for p in pods_of_job(cluster, namespace, job) if p["status"].get("phase") == "Running"
        ]
        return pods if len(pods) == count else None

    try:
        return wait_for(f"{count} pods of {namespace}/{job} Running", probe, timeout=180)
    except AssertionError as err:
        raise AssertionError(f"{err}\n{cluster.job_story(namespace, job)}") from None


def held_back(cluster: Cluster, namespace: str, name: str) -> None:
    """The Workload stays without quota for QUIET seconds."""
    deadline = time.monotonic() + QUIET
    while time.monotonic() < deadline:
        workload = workloads(cluster, namespace)[name]
        assert not is_true(workload, "QuotaReserved"), workload["status"]
        time.sleep(0.5)


def pending_reason(cluster: Cluster, namespace: str, name: str) -> JSON:
    def probe() -> JSON | None:
        workload = workloads(cluster, namespace).get(name)
        found = condition(workload, "QuotaReserved") if workload else None
        return found if found and found["status"] == "False" and found.get("message") else None

    return wait_for(f"{namespace}/{name} pending with a reason", probe)


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


def test_team_quota_admits_jobs_up_to_its_cores(cluster: Cluster) -> None:
    files = ("kueue-team-quota/team-quota.yaml",)
    namespace = "example-kueue-team"
    cluster.apply(*files)
    try:
        jobs = {f"train-{i}" for i in range(1, 6)}
        wait_for("four of five Jobs admitted", lambda: len(admitted(cluster, namespace)) == 4)
        [waiting] = jobs - admitted(cluster, namespace)
        reason = pending_reason(cluster, namespace, waiting)
        assert reason["reason"] == "Pending"
        assert (
            "insufficient unused quota for aws.amazon.com/neuroncore in flavor trainium"
            in reason["message"]
        )
        for job in admitted(cluster, namespace):
            [pod] = running_pods(cluster, namespace, job, 1)
            assert len(results(device_claim(cluster, pod))) == 2, job
        held_back(cluster, namespace, waiting)
        job_object = client.BatchV1Api(cluster.api).read_namespaced_job(waiting, namespace)
        assert job_object.spec.suspend
        usage = cluster_queue(cluster, "example-team-quota")["status"]["flavorsReservation"][0]
        reserved = {r["name"]: r["total"] for r in usage["resources"]}
        assert reserved["aws.amazon.com/neuroncore"] == "8"
        # A freed slot admits the waiting Job.
        first = sorted(admitted(cluster, namespace))[0]
        cluster.kubectl("delete", "job", first, "-n", namespace, "--wait")
        wait_for(f"{waiting} admitted", lambda: waiting in admitted(cluster, namespace))
    finally:
        cluster.delete(*files)


def test_rack_gang_is_admitted_whole_and_not_overtaken(cluster: Cluster) -> None:
    folder = "kueue-rack-gang"
    namespace = "example-kueue-gang"
    files = [f"{folder}/{name}.yaml" for name in ("queue", "small-1", "rack-train", "small-2")]
    cluster.apply(files[0], files[1])
    try:
        wait_for("small-1 admitted", lambda: admitted(cluster, namespace) == {"small-1"})
        cluster.apply(files[2])
        reason = pending_reason(cluster, namespace, "rack-train")
        assert (
            "insufficient unused quota for aws.amazon.com/neuron in flavor trainium"
            in (reason["message"])
        )
        assert pods_of_job(cluster, namespace, "rack-train") == []
        time.sleep(1.1)  # Workloads are ordered by creation time, to the second
        cluster.apply(files[3])
        wait_for("small-2's Workload", lambda: "small-2" in workloads(cluster, namespace))
        held_back(cluster, namespace, "small-2")
        cluster.kubectl("delete", "-f", str(ROOT / "deploy/examples" / files[1]), "--wait")
        wait_for("rack-train admitted", lambda: "rack-train" in admitted(cluster, namespace))
        pods = running_pods(cluster, namespace, "rack-train", RACK.servers)
        assert len({p["spec"]["nodeName"] for p in pods}) == RACK.servers
        for pod in pods:
            assert len(results(device_claim(cluster, pod))) == RACK.chips_per_server
        assert admitted(cluster, namespace) == {"rack-train"}
    finally:
        cluster.delete(*files)


def test_high_priority_rack_job_preempts_low_jobs(cluster: Cluster) -> None:
    folder = "kueue-priority"
    namespace = "example-kueue-priority"
    files = [f"{folder}/{name}.yaml" for name in ("queue", "low", "rack-train")]
    cluster.apply(files[0], files[1])
    try:
        wait_for("low jobs admitted", lambda: admitted(cluster, namespace) == {"low-1", "low-2"})
        for job in ("low-1", "low-2"):
            running_pods(cluster, namespace, job, 1)
        cluster.apply(files[2])
        wait_for("rack-train admitted", lambda: admitted(cluster, namespace) == {"rack-train"})
        found = workloads(cluster, namespace)
        for job in ("low-1", "low-2"):
            evicted = condition(found[job], "Evicted")
            assert evicted is not None and evicted["reason"] == "Preempted", found[job]["status"]
            assert client.BatchV1Api(cluster.api).read_namespaced_job(job, namespace).spec.suspend
        running_pods(cluster, namespace, "rack-train", RACK.servers)
        for job in ("low-1", "low-2"):
            assert pods_of_job(cluster, namespace, job) == []
            assert not is_true(workloads(cluster, namespace)[job], "QuotaReserved")
    finally:
        cluster.delete(*files)


def test_a_team_borrows_and_the_lender_reclaims(cluster: Cluster) -> None:
    folder = "kueue-borrowing"
    files = [f"{folder}/{name}.yaml" for name in ("queues", "team-a", "team-b")]
    team_a, team_b = "example-kueue-team-a", "example-kueue-team-b"
    cluster.apply(files[0], files[1])
    try:
        wait_for("a's three Jobs admitted", lambda: len(admitted(cluster, team_a)) == 3)

        def borrowed() -> dict[str, str]:
            status = cluster_queue(cluster, "example-team-a")["status"]
            resources = status["flavorsReservation"][0]["resources"]
            return {r["name"]: r.get("borrowed", "0") for r in resources}

        wait_for("a borrowing 4 cores", lambda: borrowed()["aws.amazon.com/neuroncore"] == "4")
        cluster.apply(files[2])
        wait_for("b's two Jobs admitted", lambda: len(admitted(cluster, team_b)) == 2)
        wait_for("a back within its quota", lambda: len(admitted(cluster, team_a)) == 2)
        evicted = [
            name
            for name, w in workloads(cluster, team_a).items()
            if (condition(w, "Evicted") or {}).get("reason") == "Preempted"
        ]
        assert len(evicted) == 1
        wait_for("a borrowing nothing", lambda: borrowed()["aws.amazon.com/neuroncore"] == "0")
    finally:
        cluster.delete(*files)


REFUSED = {
    "first-available": "FirstAvailable device selection is not supported",
    "partition": "DeviceClass core.trainium.sim.dev is not mapped in DRA configuration",
    "named-claim": "DynamicResourceAllocation feature does not support use of resource claims",
}


def test_kueue_refuses_claims_it_cannot_count(cluster: Cluster) -> None:
    files = ("kueue-refused/refused.yaml",)
    namespace = "example-kueue-refused"
    cluster.apply(*files)
    try:
        for pod, message in REFUSED.items():
            reason = pending_reason(cluster, namespace, pod)
            assert reason["reason"] == "Inadmissible", reason
            assert message in reason["message"], reason
            found = cluster.pod(namespace, pod)
            assert found is not None
            assert {"name": "kueue.x-k8s.io/admission"} in found["spec"]["schedulingGates"]
            assert not found["spec"].get("nodeName")
    finally:
        cluster.delete(*files)


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
