"""What a job becomes in Kubernetes, the live command's refusal without a
cluster, and its exit statuses."""

from pathlib import Path

import pytest

from driver.jsontypes import JSON
from localsim.commands.running import NotRunningError
from whatif import cli as whatif
from whatif.jobobjects import JOB_LABEL, PodStyle, job_objects
from whatif.jobs import Job, PodShape
from whatif.livecluster import speedup_for

DRIVER = "trainium.sim.dev"


def requests(objects: list[JSON]) -> list[JSON]:
    return [
        o["spec"]["devices"]["requests"][0]["exactly"]
        for o in objects
        if o["kind"] == "ResourceClaim"
    ]


def test_each_shape_asks_for_its_device_class() -> None:
    core = job_objects(Job("c", 0, 1, PodShape("cores", 2), 1), "ns", DRIVER, gangs=True)
    [request] = requests(core)
    assert request["deviceClassName"] == f"core.{DRIVER}"
    assert request["selectors"][0]["cel"]["expression"].endswith("coreCount == 2")
    [chips] = requests(job_objects(Job("k", 0, 1, PodShape("chips", 4), 1), "ns", DRIVER, True))
    assert chips == {"deviceClassName": f"chip.{DRIVER}", "count": 4}
    [rack] = requests(job_objects(Job("r", 0, 1, PodShape("rack"), 1), "ns", DRIVER, True))
    assert rack == {"deviceClassName": f"ultraserver.{DRIVER}"}


def test_a_gang_is_a_pod_group_of_all_its_pods() -> None:
    objects = job_objects(Job("g", 0, 3, PodShape("server"), 1), "ns", DRIVER, gangs=True)
    assert [o["kind"] for o in objects] == ["PodGroup"] + ["ResourceClaim", "Pod"] * 3
    assert objects[0]["spec"]["schedulingPolicy"]["gang"]["minCount"] == 3
    pods = [o for o in objects if o["kind"] == "Pod"]
    assert {p["spec"]["schedulingGroup"]["podGroupName"] for p in pods} == {"g"}
    assert {p["spec"]["resourceClaims"][0]["resourceClaimName"] for p in pods} == {
        "g-0",
        "g-1",
        "g-2",
    }
    assert all(o["metadata"]["labels"][JOB_LABEL] == "g" for o in objects)
    alone = job_objects(Job("g", 0, 3, PodShape("server"), 1), "ns", DRIVER, gangs=False)
    assert "PodGroup" not in {o["kind"] for o in alone}
    assert not any("schedulingGroup" in o["spec"] for o in alone if o["kind"] == "Pod")


def test_live_without_a_cluster_says_how_to_start_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert whatif.main(["live", f"--state-dir={tmp_path}", "--out", str(tmp_path / "o")]) == 1
    assert "trainium-dra up" in capsys.readouterr().err


def test_a_cluster_too_slow_is_told_apart_from_bad_input() -> None:
    """TimeoutError is an OSError; the exit status still says which it was."""
    assert whatif.exit_status(NotRunningError("no cluster")) == 1
    assert whatif.exit_status(ValueError("--jobs: must be positive")) == 2
    assert whatif.exit_status(FileNotFoundError("trace.csv")) == 2
    assert whatif.exit_status(TimeoutError("namespace whatif: still there")) == 3


def test_the_clock_fits_the_trace_into_the_minutes_asked() -> None:
    jobs = [Job("a", 0, 1, PodShape("cores", 1), 600), Job("b", 1200, 1, PodShape("rack"), 600)]
    assert speedup_for(jobs, minutes=5) == 1800 / 300
    assert speedup_for(jobs[:1], minutes=60) == 1.0


def test_a_run_after_an_eviction_has_new_names_and_keeps_the_pod_group() -> None:
    job = Job("g", 0, 2, PodShape("server"), 1)
    again = job_objects(job, "ns", DRIVER, gangs=True, attempt=2)
    assert [o["kind"] for o in again] == ["ResourceClaim", "Pod"] * 2
    assert [o["metadata"]["name"] for o in again] == ["g-r2-0", "g-r2-0", "g-r2-1", "g-r2-1"]
    assert {o["spec"]["schedulingGroup"]["podGroupName"] for o in again if o["kind"] == "Pod"} == {
        "g"
    }


def test_neuron_style_pods_ask_for_extended_resources_and_no_claim() -> None:
    style = PodStyle(
        {"cores": "aws.amazon.com/neuroncore", "chips": "aws.amazon.com/neuron"},
        scheduler="binpack",
    )
    [core] = job_objects(Job("c", 0, 1, PodShape("cores", 2), 1), "ns", DRIVER, True, style=style)
    assert core["kind"] == "Pod" and "resourceClaims" not in core["spec"]
    assert core["spec"]["containers"][0]["resources"] == {
        "limits": {"aws.amazon.com/neuroncore": "2"}
    }
    assert core["spec"]["schedulerName"] == "binpack"
    gang = job_objects(Job("g", 0, 2, PodShape("chips", 4), 1), "ns", DRIVER, True, style=style)
    assert [o["kind"] for o in gang] == ["PodGroup", "Pod", "Pod"]
    assert gang[1]["spec"]["containers"][0]["resources"]["limits"] == {"aws.amazon.com/neuron": "4"}
    [claim, pod] = job_objects(
        Job("s", 0, 1, PodShape("server"), 1), "ns", DRIVER, True, style=style
    )
    assert claim["kind"] == "ResourceClaim" and pod["spec"]["schedulerName"] == "binpack"


def test_through_kueue_a_pod_names_its_queue_and_a_gang_is_one_pod_group_per_run() -> None:
    style = PodStyle(
        {"server": "trainium.sim.dev/server", "rack": "trainium.sim.dev/ultraserver"},
        queue="whatif",
    )
    gang = job_objects(Job("g", 0, 2, PodShape("server"), 1), "ns", DRIVER, True, style=style)
    pods = [o for o in gang if o["kind"] == "Pod"]
    assert [o["kind"] for o in gang] == ["PodGroup", "Pod", "Pod"]
    assert {p["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] for p in pods} == {"whatif"}
    assert {p["metadata"]["labels"]["kueue.x-k8s.io/pod-group-name"] for p in pods} == {"g"}
    assert {p["metadata"]["annotations"]["kueue.x-k8s.io/pod-group-total-count"] for p in pods} == {
        "2"
    }
    assert pods[0]["spec"]["containers"][0]["resources"] == {
        "limits": {"trainium.sim.dev/server": "1"}
    }
    again = job_objects(
        Job("g", 0, 2, PodShape("server"), 1), "ns", DRIVER, True, attempt=1, style=style
    )
    assert {p["metadata"]["labels"]["kueue.x-k8s.io/pod-group-name"] for p in again} == {"g-r1"}
    [rack] = job_objects(Job("r", 0, 1, PodShape("rack"), 1), "ns", DRIVER, True, style=style)
    assert "kueue.x-k8s.io/pod-group-name" not in rack["metadata"]["labels"]
    assert rack["spec"]["containers"][0]["resources"]["limits"] == {
        "trainium.sim.dev/ultraserver": "1"
    }
