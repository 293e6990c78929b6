"""The replay through the real scheduler on a local cluster (one Trn3 Gen1
rack, node pools): every job of a small trace runs, for its duration, a
whole-rack job runs alone, after every job under it has ended, and a chip
that fails under a job evicts it through the driver's taints."""

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from driver.localsim.commands.running import open_running
from driver.whatif import main as whatif
from driver.whatif.faults import Failure, ScriptedFailures
from driver.whatif.jobs import Job, PodShape
from driver.whatif.live import FaultTargets, replay_live
from simdevice.topology import rack_spec
from testbed.localcluster import Cluster, running_cluster

pytestmark = pytest.mark.integration

SPEEDUP = 4.0
JOBS = [
    Job("a-core", 0, 1, PodShape("cores", 1), 20),
    Job("b-half", 0, 1, PodShape("cores", 4), 20),
    Job("c-chip", 4, 1, PodShape("chips", 1), 20),
    Job("d-server", 4, 1, PodShape("server"), 30),
    Job("e-gang", 8, 2, PodShape("server"), 20),
    Job("f-rack", 12, 1, PodShape("rack"), 10),
]


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with running_cluster("--generation", "trn3-gen1", "--pools", "node") as running:
        yield running


MIX = "cores-1=0.3,cores-4=0.2,chips-1=0.2,chips-4=0.1,server=0.1,serverx2=0.05,rack=0.05"


def test_the_command_replays_a_few_dozen_jobs_beside_the_anchor(
    cluster: Cluster, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    argv = ["live", f"--state-dir={cluster.paths.root}", "--jobs", "30", "--mix", MIX]
    cap = ["--max-duration-hours", str(60 / 3600), "--load", "1.0", "--minutes", "0.5"]
    code = whatif.main([*argv, *cap, "--idle-seconds", "60", "--out", str(out)])
    assert code == 0
    result = json.loads((out / "result.json").read_text())
    live, *anchor = result["runs"]
    assert live["policy"] == "kube-scheduler" and [r["policy"] for r in anchor] == [
        "first-fit",
        "best-fit",
    ]
    assert live["jobs_run"] == 30, live
    assert live["unusable_free_share_while_waiting"] is None
    assert 0 < live["allocation_rate_while_arriving"] <= 1
    assert result["speedup"] >= 1 and result["wall_seconds"] > 0
    report = (out / "report.md").read_text()
    assert "| kube-scheduler | on | 30 | 0 |" in report
    cpu = result["cpu_seconds_by_process"]
    assert cpu["kube-scheduler"] > 0 and cpu["kube-apiserver"] > 0 and cpu["whatif"] > 0, cpu
    scheduled = result["scheduler_attempts"]["scheduled"]
    assert scheduled["attempts"] >= 30 and scheduled["seconds"] > 0, result["scheduler_attempts"]
    assert "## Where the wall time went" in report


def test_neuron_style_requests_run_under_the_bin_packing_profile(
    cluster: Cluster, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    argv = ["live", f"--state-dir={cluster.paths.root}", "--jobs", "8", "--out", str(out)]
    mix = ["--mix", "cores-1=0.4,cores-2=0.3,chips-2=0.3", "--max-duration-hours", str(20 / 3600)]
    style = ["--requests", "extended", "--scheduler-name", "trainium-dra-binpack"]
    assert whatif.main([*argv, *mix, *style, "--minutes", "0.2", "--idle-seconds", "30"]) == 0
    [live, *_] = json.loads((out / "result.json").read_text())["runs"]
    assert live["jobs_run"] == 8, live


def test_the_live_run_times_each_job_and_keeps_the_rack_alone(
    cluster: Cluster, tmp_path: Path
) -> None:
    rack = rack_spec("trn3-gen1")
    with open_running(cluster.paths) as running:
        got = replay_live(
            running.api,
            JOBS,
            rack,
            1,
            namespace="whatif-spans",
            driver=running.spec.driver,
            speedup=SPEEDUP,
            idle_seconds=60,
        )
    spans: dict[str, tuple[float, float]] = {}
    for r in got.replay.records:
        assert r.start is not None and r.end is not None, f"{r.job.name} never ran"
        spans[r.job.name] = (r.start, r.end)
    slack = 3 * SPEEDUP  # the replay's loop and the deletion, in simulated seconds
    for job in JOBS:
        start, end = spans[job.name]
        assert start >= job.arrival
        assert job.duration <= end - start <= job.duration + slack, job.name
    rack_start = spans["f-rack"][0]
    assert all(end <= rack_start for name, (_, end) in spans.items() if name != "f-rack")


def test_a_failed_chip_evicts_the_rack_job_which_runs_again_once_repaired(cluster: Cluster) -> None:
    rack = rack_spec("trn3-gen1")
    job = Job("whole-rack", 0, 1, PodShape("rack"), 80)
    failure, repair = Failure(40.0, (0, 1, 3), 0xFF), 20.0
    with open_running(cluster.paths) as running:
        [plan] = running.spec.racks
        targets = FaultTargets(
            [str(cluster.paths.sim_control_socket(plan.name))], [plan.node_names()]
        )
        got = replay_live(
            running.api,
            [job],
            rack,
            1,
            namespace="whatif-faults",
            driver=running.spec.driver,
            speedup=SPEEDUP,
            idle_seconds=60,
            failures=ScriptedFailures([failure], repair),
            fault_targets=targets,
        )
    assert got.failures == [failure] and got.replay.failures == 1
    [record] = got.replay.records
    assert record.evictions == 1
    assert record.start is not None and record.end is not None
    # The rack device stays tainted while the chip is out: the second run
    # binds only after the repair, and runs its whole duration.
    assert record.start >= failure.time + repair
    assert job.duration <= record.end - record.start <= job.duration + 3 * SPEEDUP
    cores = rack.chips * rack.chip.cores
    assert cores * 10 <= record.lost_core_seconds <= cores * record.start
