"""The what-if's Kueue objects and when it takes Kueue to have settled."""

import threading

import pytest
from kubernetes import client

from driver.jsontypes import JSON
from driver.kubeapi.apiserver import ApiServer
from whatif.jobobjects import PodStyle, job_objects
from whatif.jobs import Job, PodShape
from whatif.kueue import PRIORITY_LABEL, KueueQueue, queue_objects
from whatif.kueuewatch import (
    SPACING_MARGIN,
    KueueWatch,
    Quota,
    WorkloadState,
    admissible,
    created_at,
    gated,
    spacing,
    unsettled,
    workload_state,
)


def test_the_replay_queue_counts_the_fleet_in_cores_for_its_namespace_only() -> None:
    flavor, cq, lq = KueueQueue("strict", "aws.amazon.com/neuroncore", 1152).objects("whatif")
    assert flavor["kind"] == "ResourceFlavor"
    assert cq["spec"]["queueingStrategy"] == "StrictFIFO"
    assert cq["spec"]["namespaceSelector"] == {
        "matchLabels": {"kubernetes.io/metadata.name": "whatif"}
    }
    [group] = cq["spec"]["resourceGroups"]
    assert group["coveredResources"] == ["aws.amazon.com/neuroncore"]
    assert group["flavors"][0]["resources"] == [
        {"name": "aws.amazon.com/neuroncore", "nominalQuota": "1152"}
    ]
    assert (lq["metadata"]["namespace"], lq["spec"]["clusterQueue"]) == (
        "whatif",
        cq["metadata"]["name"],
    )
    best = queue_objects("best-effort", "ns", "r", 1)[1]
    assert best["spec"]["queueingStrategy"] == "BestEffortFIFO"
    with pytest.raises(ValueError, match="--kueue 'lifo': choose one of strict, best-effort"):
        queue_objects("lifo", "ns", "r", 1)


def test_each_priority_other_than_0_brings_a_workload_priority_class_named_by_its_pods() -> None:
    queue = KueueQueue("strict", "r", 8, frozenset({10, -2}))
    low, high, *rest = queue.objects("whatif")
    assert [o["kind"] for o in (low, high)] == ["WorkloadPriorityClass"] * 2
    assert (low["value"], high["value"]) == (-2, 10)
    assert [o["kind"] for o in rest] == ["ResourceFlavor", "ClusterQueue", "LocalQueue"]
    style = PodStyle({"rack": "r"}, queue="whatif")
    urgent = Job("j", 0, 1, PodShape("rack"), 1, priority=10)
    [pod] = job_objects(urgent, "ns", "d", True, style=style)
    assert pod["metadata"]["labels"][PRIORITY_LABEL] == high["metadata"]["name"]
    [plain] = job_objects(Job("j", 0, 1, PodShape("rack"), 1), "ns", "d", True, style=style)
    assert PRIORITY_LABEL not in plain["metadata"]["labels"]


def workload(
    pods: set[str],
    *,
    admitted: bool = False,
    finished: bool = False,
    order: tuple[int, str, str] = (0, "", ""),
) -> WorkloadState:
    return WorkloadState(frozenset(pods), admitted, finished, admitted, order)


def test_kueue_has_settled_only_when_every_gated_pod_waits_in_an_unadmitted_workload() -> None:
    pending = {"a": workload({"a-0", "a-1"}), "b": workload({"b-0"}, admitted=True)}
    assert unsettled(pending, {"a-0", "a-1"}, {"a-0", "a-1", "b-0"}) is None
    assert unsettled(pending, {"a-0", "a-1", "c-0"}, {"a-0", "a-1", "c-0", "b-0"}) == (
        "1 pods with no Workload yet"
    )
    assert unsettled(pending, {"b-0"}, {"b-0"}) == "1 gated pods of admitted Workloads"
    gone = {"b": workload({"b-0"}, admitted=True)}
    assert unsettled(gone, set(), set()) == "1 admitted Workloads whose pods are gone"
    assert unsettled({"b": workload({"b-0"}, admitted=True, finished=True)}, set(), set()) is None


def test_kueue_has_not_settled_while_the_workload_it_tries_fits_the_quota_left() -> None:
    """A rack (8 cores) has ended and its Workload finished: a waiting core
    fits what is left, though Kueue may not have acted on it yet."""
    cores = {"rack-0": 8, "core-0": 1, "core-1": 1, "big-0": 8}
    ended = {"rack": workload({"rack-0"}, admitted=True, finished=True)}
    first = workload({"core-0"}, order=(0, "2026-12-07T04:00:01Z", "b"))
    second = workload({"core-1"}, order=(0, "2026-12-07T04:00:02Z", "a"))
    waiting = ended | {"core-1": second, "core-0": first}
    queued = {"core-0", "core-1"}
    assert admissible(waiting, queued, cores, Quota(8, strict=True)) == "core-0"
    held = waiting | {"rack": workload({"rack-0"}, admitted=True)}
    assert admissible(held, queued, cores, Quota(8, strict=True)) is None
    assert admissible(held, queued, cores, Quota(9, strict=False)) == "core-0"
    urgent = workload({"big-0"}, order=(-5, "2026-12-07T04:00:03Z", "c"))
    blocked = waiting | {"big": urgent}
    assert admissible(blocked, queued | {"big-0"}, cores, Quota(7, strict=True)) is None, (
        "StrictFIFO tries only its head, the higher priority"
    )
    assert admissible(blocked, queued | {"big-0"}, cores, Quota(7, strict=False)) == "core-0"
    assert admissible(waiting, {"core-1"}, cores, Quota(8, strict=True)) == "core-1", (
        "a Workload whose pods are not all held back is not waiting in the queue"
    )
    unknown = held | {"other": workload({"elsewhere-0"}, admitted=True)}
    assert admissible(unknown, queued, cores, Quota(100, strict=False)) is None, (
        "quota held by pods of unknown size leaves an unknown remainder"
    )


def test_a_workload_is_read_from_its_owners_and_conditions() -> None:
    obj: JSON = {
        "metadata": {
            "name": "pod-a",
            "ownerReferences": [
                {"kind": "Pod", "name": "a-0"},
                {"kind": "Pod", "name": "a-1"},
                {"kind": "Job", "name": "x"},
            ],
        },
        "status": {
            "conditions": [
                {"type": "QuotaReserved", "status": "True"},
                {"type": "Admitted", "status": "True"},
                {"type": "Finished", "status": "False"},
            ]
        },
    }
    assert workload_state(obj) == workload({"a-0", "a-1"}, admitted=True)
    obj["metadata"] |= {"creationTimestamp": "2026-12-07T04:00:01Z", "uid": "u"}
    obj["spec"] = {"priority": 5}
    assert workload_state(obj).order == (-5, "2026-12-07T04:00:01Z", "u")
    assert workload_state({"metadata": {"name": "w"}}) == workload(set())
    assert gated({"spec": {"schedulingGates": [{"name": "kueue.x-k8s.io/admission"}]}})
    assert not gated({"spec": {"schedulingGates": [{"name": "other"}]}})
    assert not gated({"spec": {}})


def test_arrivals_wait_only_while_the_latest_workload_s_second_lasts() -> None:
    """Kueue breaks a tie of creation seconds by UID: later arrivals must be
    created in a later second than the latest Workload, and need not wait once
    that second has passed."""
    latest = created_at({"metadata": {"creationTimestamp": "2026-12-06T22:30:01Z"}})
    assert latest == 1796596201.0
    assert spacing(latest + 0.25, latest) == pytest.approx(0.75 + SPACING_MARGIN, abs=1e-6)
    assert spacing(latest + 0.999, latest) == pytest.approx(0.001 + SPACING_MARGIN, abs=1e-6)
    assert spacing(latest + 1 + SPACING_MARGIN, latest) == 0.0
    assert spacing(latest + 7.5, latest) == 0.0


def test_a_replay_ends_with_jobs_queued_only_once_kueue_stood_still() -> None:
    """What the replay asks before it ends with jobs still queued: a Workload
    changing meanwhile (Kueue admitting one late) says Kueue moves, nothing
    changing says it does not, and a change before the question does not count."""
    server = ApiServer(client.Configuration(host="http://127.0.0.1:1"), "trainium-dra-test", 1.0)
    watch = KueueWatch(server, "whatif", Quota(8, strict=True))
    admitted: JSON = {
        "metadata": {
            "name": "pod-a",
            "creationTimestamp": "2026-12-07T04:00:01Z",
            "ownerReferences": [{"kind": "Pod", "name": "a-0"}],
        },
        "status": {"conditions": [{"type": "Admitted", "status": "True"}]},
    }
    later = threading.Timer(0.5, watch._event, ("MODIFIED", admitted))
    later.start()
    try:
        assert watch.moves_within(30.0)
    finally:
        later.cancel()
    assert not watch.moves_within(0.5)
    watch._event("MODIFIED", admitted)
    assert not watch.moves_within(0.5), "the same state again is no change"
