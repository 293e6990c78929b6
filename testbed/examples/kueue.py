"""Each deploy/examples/kueue-* example checked as its README says, on a
`target` running Kueue with the default queues of `trainium-dra up
--with-kueue`: the stand-in rack (tests/e2e/test_kueue.py) or the kind cluster
(tests/kind/test_kueue_examples.py), whose Gen1 rack gets the whole-rack
examples fitted to it (testbed/examples/rackscale.py)."""

import time

from kubernetes import client

from testbed.examples.target import Target
from testbed.kueue import (
    AFTER_PREEMPTION_TIMEOUT,
    admitted,
    cluster_queue,
    condition,
    held_back,
    is_true,
    pending_reason,
    pods_of_job,
    running_pods,
    workloads,
)
from testbed.localcluster import results, wait_for


def test_team_quota_admits_jobs_up_to_its_cores(target: Target) -> None:
    cluster = target.cluster
    files = ("kueue-team-quota/team-quota.yaml",)
    namespace = "example-kueue-team"
    target.apply(*files)
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
            assert len(results(target.claim_of(pod))) == 2, job
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
        target.delete(*files)


def test_rack_gang_is_admitted_whole_and_not_overtaken(target: Target) -> None:
    cluster, rack = target.cluster, target.rack
    folder = "kueue-rack-gang"
    namespace = "example-kueue-gang"
    files = [f"{folder}/{name}.yaml" for name in ("queue", "small-1", "rack-train", "small-2")]
    target.apply(files[0], files[1])
    try:
        wait_for("small-1 admitted", lambda: admitted(cluster, namespace) == {"small-1"})
        target.apply(files[2])
        reason = pending_reason(cluster, namespace, "rack-train")
        assert (
            "insufficient unused quota for aws.amazon.com/neuron in flavor trainium"
            in (reason["message"])
        )
        assert pods_of_job(cluster, namespace, "rack-train") == []
        time.sleep(1.1)  # Workloads are ordered by creation time, to the second
        target.apply(files[3])
        wait_for("small-2's Workload", lambda: "small-2" in workloads(cluster, namespace))
        held_back(cluster, namespace, "small-2")
        target.delete(files[1])
        wait_for("rack-train admitted", lambda: "rack-train" in admitted(cluster, namespace))
        pods = running_pods(cluster, namespace, "rack-train", rack.servers)
        assert len({p["spec"]["nodeName"] for p in pods}) == rack.servers
        for pod in pods:
            assert len(results(target.claim_of(pod))) == rack.chips_per_server
        assert admitted(cluster, namespace) == {"rack-train"}
    finally:
        target.delete(*files)


def test_high_priority_rack_job_preempts_low_jobs(target: Target) -> None:
    cluster, rack = target.cluster, target.rack
    folder = "kueue-priority"
    namespace = "example-kueue-priority"
    files = [f"{folder}/{name}.yaml" for name in ("queue", "low", "rack-train")]
    target.apply(files[0], files[1])
    try:
        wait_for("low jobs admitted", lambda: admitted(cluster, namespace) == {"low-1", "low-2"})
        for job in ("low-1", "low-2"):
            running_pods(cluster, namespace, job, 1)
        target.apply(files[2])
        wait_for("rack-train admitted", lambda: admitted(cluster, namespace) == {"rack-train"})
        found = workloads(cluster, namespace)
        for job in ("low-1", "low-2"):
            evicted = condition(found[job], "Evicted")
            assert evicted is not None and evicted["reason"] == "Preempted", found[job]["status"]
            assert client.BatchV1Api(cluster.api).read_namespaced_job(job, namespace).spec.suspend
        running_pods(cluster, namespace, "rack-train", rack.servers, AFTER_PREEMPTION_TIMEOUT)
        for job in ("low-1", "low-2"):
            assert pods_of_job(cluster, namespace, job) == []
            assert not is_true(workloads(cluster, namespace)[job], "QuotaReserved")
    finally:
        target.delete(*files)


def test_a_team_borrows_and_the_lender_reclaims(target: Target) -> None:
    cluster = target.cluster
    folder = "kueue-borrowing"
    files = [f"{folder}/{name}.yaml" for name in ("queues", "team-a", "team-b")]
    team_a, team_b = "example-kueue-team-a", "example-kueue-team-b"
    target.apply(files[0], files[1])
    try:
        wait_for("a's three Jobs admitted", lambda: len(admitted(cluster, team_a)) == 3)

        def borrowed() -> dict[str, str]:
            status = cluster_queue(cluster, "example-team-a")["status"]
            resources = status["flavorsReservation"][0]["resources"]
            return {r["name"]: r.get("borrowed", "0") for r in resources}

        wait_for("a borrowing 4 cores", lambda: borrowed()["aws.amazon.com/neuroncore"] == "4")
        target.apply(files[2])
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
        target.delete(*files)


REFUSED = {
    "first-available": "FirstAvailable device selection is not supported",
    "partition": "DeviceClass core.trainium.sim.dev is not mapped in DRA configuration",
    "named-claim": "DynamicResourceAllocation feature does not support use of resource claims",
}


def test_kueue_refuses_claims_it_cannot_count(target: Target) -> None:
    cluster = target.cluster
    files = ("kueue-refused/refused.yaml",)
    namespace = "example-kueue-refused"
    target.apply(*files)
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
        target.delete(*files)
