"""The replay through the real scheduler on a local cluster (one Trn3 Gen1
rack, node pools): on the settle clock every job of a small trace runs for
exactly its duration and a trace with a known answer gets it, job by job,
as the offline anchor does; a whole-rack job runs alone, after every job
under it has ended; a job with work runs as long as its work takes on the
chips its claims were allocated; a chip that fails under a job evicts it
through the driver's taints; the wall clock still replays a trace to watch
live."""

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from driver.kubeapi.apiserver import ApiServer
from driver.kubeapi.informer import Informer
from driver.kubeapi.objects import Objects
from driver.kubeapi.resources import CLAIMS, SLICES, path_of
from localsim.commands.running import Running, open_running
from simdevice.fabric import RankPlace
from simdevice.topology import rack_spec
from testbed.localcluster import Cluster, running_cluster
from whatif import cli as whatif
from whatif.faults import Failure, ScriptedFailures
from whatif.figures import summarize
from whatif.jobs import Job, PodShape
from whatif.jobtimes import parse_work, with_work
from whatif.live import FaultTargets, replay_live
from whatif.livecluster import bearer_token
from whatif.offline import QUEUEING, replay
from whatif.placetimes import duration_on
from whatif.settleclock import SettleClock

pytestmark = pytest.mark.integration

GEN1 = rack_spec("trn3-gen1")
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
    cap = ["--max-duration-hours", str(60 / 3600), "--load", "1.0"]
    code = whatif.main([*argv, *cap, "--out", str(out)])
    assert code == 0
    result = json.loads((out / "result.json").read_text())
    live, *anchor = result["runs"]
    assert live["policy"] == "kube-scheduler"
    assert [(r["policy"], r["queueing"]) for r in anchor] == [
        (policy, queueing) for policy in ("first-fit", "best-fit") for queueing in QUEUEING
    ]
    assert live["jobs_run"] == 30, live
    assert live["unusable_free_share_while_waiting"] is None
    assert 0 < live["allocation_rate_while_arriving"] <= 1
    assert result["clock"] == "settle" and result["settle"]["timeouts"] == 0, result["settle"]
    assert result["settle"]["events"] >= 2 and result["wall_seconds"] > 0
    records = result["jobs"]["kube-scheduler, gangs on"]
    assert len(records) == 30 and all(r["nodes"] and r["servers"] for r in records)
    assert [d["anchor"] for d in result["diff"]] == [
        f"{r['policy']} {r['queueing']}" for r in anchor
    ]
    report = (out / "report.md").read_text()
    assert "| kube-scheduler | none | on | 30 | 0 |" in report
    assert "## Where live and the anchors part" in report
    assert (out / "timeline-kube-scheduler-gangs-on.png").stat().st_size > 0
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
    wall = ["--clock", "wall", "--minutes", "0.2", "--idle-seconds", "30"]
    assert whatif.main([*argv, *mix, *style, *wall]) == 0
    result = json.loads((out / "result.json").read_text())
    assert result["clock"] == "wall" and result["speedup"] >= 1
    assert result["runs"][0]["jobs_run"] == 8, result["runs"][0]


def settle_clock(running: Running) -> SettleClock:
    assert running.scheduler_metrics is not None
    return SettleClock(
        running.scheduler_metrics, bearer_token(running.api), running.controller_metrics
    )


def test_the_live_run_times_each_job_and_keeps_the_rack_alone(cluster: Cluster) -> None:
    with open_running(cluster.paths) as running:
        got = replay_live(
            running.api,
            JOBS,
            GEN1,
            1,
            namespace="whatif-spans",
            driver=running.spec.driver,
            clock=settle_clock(running),
        )
    assert got.settle is not None and got.settle.timeouts == 0
    spans: dict[str, tuple[float, float]] = {}
    for r in got.replay.records:
        assert r.start is not None and r.end is not None, f"{r.job.name} never ran"
        spans[r.job.name] = (r.start, r.end)
    for job in JOBS:
        start, end = spans[job.name]
        assert start >= job.arrival
        assert end - start == job.duration, job.name
    rack_start = spans["f-rack"][0]
    assert all(end <= rack_start for name, (_, end) in spans.items() if name != "f-rack")


def test_a_trace_with_a_known_answer_gets_it_job_by_job(cluster: Cluster) -> None:
    """Every server of the rack taken at 0 for 1,000 s; a whole-rack job
    arriving at 10 waits for all of them and starts at 1,000: live as in the
    anchor, under either queueing policy."""
    servers = [Job(f"server-{i:02d}", 0, 1, PodShape("server"), 1000) for i in range(GEN1.servers)]
    jobs = [*servers, Job("rack", 10, 1, PodShape("rack"), 500)]
    known = {job.name: 0.0 for job in servers} | {"rack": 1000.0}
    with open_running(cluster.paths) as running:
        got = replay_live(
            running.api,
            jobs,
            GEN1,
            1,
            namespace="whatif-known",
            driver=running.spec.driver,
            clock=settle_clock(running),
            servers={node: (0, s) for s, node in enumerate(running.spec.racks[0].node_names())},
        )
    assert {r.job.name: r.start for r in got.replay.records} == known
    for queueing in QUEUEING:
        anchor = replay(jobs, GEN1, 1, policy="best-fit", queueing=queueing)
        assert {r.job.name: r.start for r in anchor.records} == known, queueing
    [rack] = [r for r in got.replay.records if r.job.name == "rack"]
    assert rack.end == 1500.0 and len(rack.servers) == GEN1.servers


class AllocatedChips:
    """The chips each claim of `namespace` was allocated, as the cluster tells
    them: a watch of the claims, and each device's server and chip from the
    attributes the driver published on it."""

    def __init__(self, running: Running, namespace: str) -> None:
        server = ApiServer(running.api.configuration, "trainium-dra-test", 30.0)
        self.chips: dict[tuple[str, str], tuple[int, int]] = {
            (s["spec"]["pool"]["name"], d["name"]): (
                d["attributes"]["serverIndex"]["int"],
                d["attributes"]["chipIndex"]["int"],
            )
            for s in Objects(server).list_all(SLICES)
            for d in s["spec"].get("devices") or ()
            if "chipIndex" in d["attributes"]
        }
        self.held: dict[str, set[tuple[int, int]]] = {}
        self.informer: Informer[Mapping[str, Any]] = Informer(
            server,
            path_of(CLAIMS, namespace=namespace),
            {},
            lambda claim: claim,
            on_list=self._list,
            on_event=lambda _, claim: self._see(claim),
        )

    def _list(self, claims: list[Mapping[str, Any]]) -> None:
        for claim in claims:
            self._see(claim)

    def _see(self, claim: Mapping[str, Any]) -> None:
        allocation = (claim.get("status") or {}).get("allocation") or {}
        for r in allocation.get("devices", {}).get("results") or ():
            self.held.setdefault(claim["metadata"]["name"], set()).add(
                self.chips[(r["pool"], r["device"])]
            )

    def of(self, job: Job) -> tuple[RankPlace, ...]:
        """The job's chips on the one rack, from its first run's claims."""
        found = {c for i in range(job.pods) for c in self.held[f"{job.name}-{i}"]}
        return tuple(RankPlace(0, s, c) for s, c in sorted(found))


def test_a_job_with_work_runs_as_long_as_it_takes_on_the_chips_it_got(cluster: Cluster) -> None:
    """Fifteen chips of every server held, a pair arriving then gets one chip
    on each of two servers and loses job-seconds to spread (latency rules a
    step this small); a job of four chips in one pod later loses none. Each
    ends when its work would on the chips its claims were allocated."""
    work = parse_work('{"kind": "train-step", "hidden": 128, "seq": 256}')
    hold = Job("hold", 0, GEN1.servers, PodShape("chips", GEN1.chips_per_server - 1), 100)
    pair = with_work(Job("pair", 1, 2, PodShape("chips", 1), 50), work, GEN1)
    four = with_work(Job("four", 200, 1, PodShape("chips", 4), 50), work, GEN1)
    namespace = "whatif-placed"
    with open_running(cluster.paths) as running:
        allocated = AllocatedChips(running, namespace)
        allocated.informer.start()
        try:
            got = replay_live(
                running.api,
                [hold, pair, four],
                GEN1,
                1,
                namespace=namespace,
                driver=running.spec.driver,
                clock=settle_clock(running),
                servers={n: (0, s) for s, n in enumerate(running.spec.racks[0].node_names())},
            )
        finally:
            allocated.informer.close()
    records = {r.job.name: r for r in got.replay.records}
    for job in (hold, pair, four):
        record = records[job.name]
        assert record.start is not None and record.end is not None, job.name
        took = duration_on(job, GEN1, allocated.of(job))
        assert record.end - record.start == pytest.approx(took), job.name
        assert record.spread_seconds == pytest.approx(took - job.duration), job.name
    assert len({p.server for p in allocated.of(pair)}) == 2
    assert records["pair"].spread_seconds and records["pair"].spread_seconds > 0
    assert records["four"].spread_seconds == 0 and records["hold"].spread_seconds == 0
    lost = summarize(got.replay)["spread_lost_job_s"]
    assert lost["jobs"] == 2 and lost["total"] == pytest.approx(records["pair"].spread_seconds)


def test_a_failed_chip_evicts_the_rack_job_which_runs_again_once_repaired(cluster: Cluster) -> None:
    rack = GEN1
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
            clock=settle_clock(running),
            failures=ScriptedFailures([failure], repair),
            fault_targets=targets,
        )
    assert got.failures == [failure] and got.replay.failures == 1
    assert got.settle is not None and got.settle.timeouts == 0, got.settle
    [record] = got.replay.records
    assert record.evictions == 1
    assert record.start is not None and record.end is not None
    # The rack device stays tainted while the chip is out: the second run
    # binds at the repair, and runs its whole duration.
    assert record.start == failure.time + repair
    assert record.end - record.start == job.duration
    cores = rack.chips * rack.chip.cores
    assert record.lost_core_seconds == cores * failure.time
