"""The replay through Kueue on a local cluster running it, counting in cores
(one Trn3 Gen1 rack): a trace with a known answer under each queueing
strategy, live job by job as in the offline anchor that queues alike.

All chips but one are taken until 1,000 s (every server but one whole at 0,
then three chips of the last at 1, so they share its server); a whole-rack
job arrives at 10 and needs all the rack's cores of quota; eight single
cores arrive at 20 for 100 s, which the one free chip holds. StrictFIFO
admits nothing behind the waiting rack job, so the cores start when it has
ended (1,500); BestEffortFIFO passes it over and admits them at once (20),
and the rack job starts at 1,000 either way. With the cores in a higher
priority, StrictFIFO's queue puts them ahead of the rack job and admits
them at 20."""

import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from simdevice.topology import rack_spec
from testbed.localcluster import Cluster, running_cluster
from whatif import cli as whatif
from whatif.jobs import Job, PodShape
from whatif.trace import write_trace

pytestmark = pytest.mark.integration

GEN1 = rack_spec("trn3-gen1")
FILLERS = [
    *(Job(f"server-{i:02d}", 0, 1, PodShape("server"), 1000) for i in range(GEN1.servers - 1)),
    *(Job(f"chip-{i}", 1, 1, PodShape("chips", 1), 999) for i in range(GEN1.chips_per_server - 1)),
]
RACK = Job("rack", 10, 1, PodShape("rack"), 500)
CORES = [Job(f"core-{i}", 20, 1, PodShape("cores", 1), 100) for i in range(GEN1.chip.cores)]
KNOWN = {
    ("strict", 0): {"rack": 1000.0} | {c.name: 1500.0 for c in CORES},
    ("best-effort", 0): {"rack": 1000.0} | {c.name: 20.0 for c in CORES},
    ("strict", 5): {"rack": 1000.0} | {c.name: 20.0 for c in CORES},
}
"""(strategy, the cores' priority) -> start of each job that parts them."""


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with running_cluster(
        "--generation", "trn3-gen1", "--pools", "node", "--with-kueue", "--kueue-quota", "cores"
    ) as running:
        yield running


@pytest.mark.parametrize(
    ("strategy", "priority"), list(KNOWN), ids=[f"{s}-cores-priority-{p}" for s, p in KNOWN]
)
def test_each_job_starts_as_the_anchor_queueing_alike_says(
    cluster: Cluster, tmp_path: Path, strategy: str, priority: int
) -> None:
    trace = tmp_path / "trace.csv"
    write_trace(trace, [*FILLERS, RACK, *(replace(c, priority=priority) for c in CORES)])
    out = tmp_path / "out"
    argv = ["live", f"--state-dir={cluster.paths.root}", "--trace", str(trace)]
    assert whatif.main([*argv, "--kueue", strategy, "--out", str(out)]) == 0
    result = json.loads((out / "result.json").read_text())
    starts = {
        replay: {j["name"]: j["start"] for j in jobs} for replay, jobs in result["jobs"].items()
    }
    live = starts["kube-scheduler, gangs on"]
    anchor = starts[f"best-fit kueue-{strategy}, gangs on"]
    known = KNOWN[strategy, priority]
    assert {name: live[name] for name in known} == known
    assert {name: anchor[name] for name in known} == known
    assert all(live[f.name] == f.arrival for f in FILLERS)
    [run] = [r for r in result["runs"] if r["policy"] == "kube-scheduler"]
    assert run["queueing"] == f"kueue-{strategy}"


def test_claims_by_name_are_refused_through_kueue(
    cluster: Cluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = tmp_path / "trace.csv"
    write_trace(trace, [RACK])
    argv = ["live", f"--state-dir={cluster.paths.root}", "--trace", str(trace)]
    out = tmp_path / "out"
    assert whatif.main([*argv, "--kueue", "strict", "--requests", "claims", "--out", str(out)]) == 2
    assert "Kueue counts what pods request, not claims by name" in capsys.readouterr().err
    assert not out.exists(), "refused before anything is written"
