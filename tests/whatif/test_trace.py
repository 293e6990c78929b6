"""Traces: our CSV, Alibaba's GPU trace format, the generator and its statistics."""

import itertools
import json
import math
import random
from dataclasses import replace
from pathlib import Path

import pytest

from simdevice.topology import rack_spec
from whatif import cli as whatif
from whatif.jobs import Job, JobError, PodShape
from whatif.trace import (
    ALIBABA_DEFAULT,
    HOURS,
    TraceError,
    TraceSpec,
    generate,
    job_label,
    lognormal_mean,
    read_alibaba_v2023,
    read_trace,
    trace_stats,
    write_trace,
)

GEN2 = rack_spec("trn3-gen2")
ALIBABA_HEADER = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
    "creation_time,deletion_time,scheduled_time"
)


def test_our_trace_reads_back_what_was_written(tmp_path: Path) -> None:
    jobs = generate(TraceSpec(50), GEN2, 2, seed=3)
    write_trace(tmp_path / "t.csv", jobs)
    again = read_trace(tmp_path / "t.csv")
    assert [(j.name, j.pods, j.shape) for j in again] == [(j.name, j.pods, j.shape) for j in jobs]
    assert all(
        math.isclose(a.arrival, b.arrival, abs_tol=1e-3) for a, b in zip(again, jobs, strict=True)
    )


def test_priorities_go_to_their_kinds_and_read_back(tmp_path: Path) -> None:
    spec = TraceSpec(200, mix={"cores-1": 0.9, "rack": 0.1}, priorities={"rack": 10})
    jobs = generate(spec, GEN2, 2, seed=5)
    assert {(j.shape.kind, j.priority) for j in jobs} == {("cores", 0), ("rack", 10)}
    write_trace(tmp_path / "t.csv", jobs)
    assert [j.priority for j in read_trace(tmp_path / "t.csv")] == [j.priority for j in jobs]
    old = tmp_path / "old.csv"
    old.write_text("name,arrival_s,pods,shape,duration_s\nj,0,1,cores-2,5\n")
    assert [j.priority for j in read_trace(old)] == [0]
    with pytest.raises(JobError, match="priority for serverx4: no such kind in the mix"):
        generate(replace(spec, priorities={"serverx4": 1}), GEN2, 2, seed=5)


def test_the_command_names_a_bad_priority(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert whatif.main(["offline", "--priority", "rack=high", "--out", str(tmp_path)]) == 2
    assert "--priority 'rack=high': write KIND=INTEGER" in capsys.readouterr().err


def test_a_bad_trace_row_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text("name,arrival_s,pods,shape,duration_s\nj,0,1,cores-3,5\n")
    with pytest.raises(TraceError, match=r"t.csv:2: .*cores-3.*partition"):
        read_trace(path)
    path.write_text("name,arrival_s,pods\n")
    with pytest.raises(TraceError, match="missing columns duration_s, shape"):
        read_trace(path)


def test_alibaba_tasks_become_jobs_of_chips_and_partitions(tmp_path: Path) -> None:
    path = tmp_path / "pods.csv"
    path.write_text(
        "\n".join(
            [
                ALIBABA_HEADER,
                "cpu-only,4000,100,0,0,,BE,Running,10,50,10",
                "shared,4000,100,1,460,,LS,Running,100,400,110",
                "tiny,4000,100,1,100,,LS,Running,100,200,100",
                "whole,4000,100,1,1000,,LS,Succeeded,200,900,250",
                "eight,4000,100,8,1000,,LS,Running,300,600,300",
                "waiting,4000,100,2,1000,,LS,Pending,400,500,",
            ]
        )
        + "\n"
    )
    jobs, skipped = read_alibaba_v2023(path, GEN2)
    assert skipped == {"no GPU": 1, "never ran": 1}
    by_name = {j.name: j for j in jobs}
    assert by_name["shared"] == Job("shared", 0, 1, PodShape("cores", 4), 290)
    assert by_name["tiny"].shape == PodShape("cores", 1)
    assert by_name["whole"] == Job("whole", 100, 1, PodShape("chips", 1), 650)
    # Eight GPUs on a server of four chips: a gang of two whole servers' chips.
    assert by_name["eight"] == Job("eight", 200, 2, PodShape("chips", 4), 300)


def test_a_file_that_is_not_the_alibaba_trace_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "other.csv"
    path.write_text("a,b\n1,2\n")
    with pytest.raises(TraceError, match="not an openb_pod_list CSV"):
        read_alibaba_v2023(path, GEN2)


def test_the_generator_follows_its_mix_and_is_repeatable() -> None:
    spec = TraceSpec(400, mix={"cores-1": 3, "serverx2": 1})
    jobs = generate(spec, GEN2, 4, seed=7)
    assert jobs == generate(spec, GEN2, 4, seed=7)
    assert jobs != generate(spec, GEN2, 4, seed=8)
    labels = {job_label(j) for j in jobs}
    assert labels == {"cores-1", "serverx2"}
    share = sum(job_label(j) == "cores-1" for j in jobs) / len(jobs)
    assert 0.65 < share < 0.85
    assert all(a.arrival <= b.arrival for a, b in itertools.pairwise(jobs))


def test_arrivals_follow_the_hourly_profile() -> None:
    nights_only = tuple(1.0 if h < 6 else 0.0 for h in range(HOURS))
    stats = replace(ALIBABA_DEFAULT, hourly=tuple(w / sum(nights_only) for w in nights_only))
    jobs = generate(TraceSpec(300, stats=stats), GEN2, 1, seed=1)
    assert {int(j.arrival // 3600) % HOURS for j in jobs} <= set(range(6))


def test_more_offered_load_means_faster_arrivals() -> None:
    slow = generate(TraceSpec(200, offered_load=0.5), GEN2, 10, seed=2)
    fast = generate(TraceSpec(200, offered_load=2.0), GEN2, 10, seed=2)
    assert fast[-1].arrival < slow[-1].arrival


def test_stats_of_a_trace() -> None:
    jobs = [
        Job("a", 0, 1, PodShape("cores", 1), math.e),
        Job("b", 3600, 2, PodShape("server"), math.e**3),
    ]
    stats = trace_stats(jobs)
    assert stats.mix == {"cores-1": 0.5, "serverx2": 0.5}
    assert stats.duration_log_mean == pytest.approx(2.0)
    assert stats.duration_log_sigma == pytest.approx(1.0)
    assert stats.hourly[:3] == (0.5, 0.5, 0.0)


def test_the_default_mix_and_profile_are_shares() -> None:
    assert sum(ALIBABA_DEFAULT.mix.values()) == pytest.approx(1.0, abs=1e-3)
    assert sum(ALIBABA_DEFAULT.hourly) == pytest.approx(1.0, abs=1e-3)


def test_the_command_writes_trace_result_and_report(tmp_path: Path) -> None:
    out = tmp_path / "out"
    code = whatif.main(
        [
            "offline",
            "--racks",
            "1",
            "--jobs",
            "60",
            "--load",
            "3",
            "--mix",
            "cores-1=0.5,chips-1=0.4,server=0.1",
            "--out",
            str(out),
        ]
    )
    assert code == 0
    result = json.loads((out / "result.json").read_text())
    assert [(r["policy"], r["queueing"]) for r in result["runs"]] == [
        ("first-fit", "backfill"),
        ("first-fit", "fifo"),
        ("best-fit", "backfill"),
        ("best-fit", "fifo"),
    ]
    assert all(r["jobs"] == r["jobs_run"] == 60 for r in result["runs"])
    assert len(read_trace(out / "trace.csv")) == 60
    report = (out / "report.md").read_text()
    assert "| first-fit | backfill | on | 60 | 0 |" in report
    assert "| best-fit | fifo | on | 60 | 0 |" in report
    assert len(result["jobs"]["best-fit fifo, gangs on"]) == 60
    for plot in ("allocation", "fragmentation", "queueing", "completion"):
        assert (out / f"{plot}.png").read_bytes().startswith(b"\x89PNG")
        assert f"![{plot}]({plot}.png)" in report


def test_the_command_names_a_bad_mix(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert whatif.main(["offline", "--mix", "gpu-1=1", "--out", str(tmp_path)]) == 2
    assert "gpu-1" in capsys.readouterr().err
    with pytest.raises(JobError):
        generate(TraceSpec(0), GEN2, 1, seed=1)


def test_a_cap_cuts_durations_and_keeps_the_offered_load() -> None:
    capped = generate(TraceSpec(500, offered_load=1.0, max_duration=3600.0), GEN2, 2, seed=4)
    assert max(j.duration for j in capped) <= 3600.0
    # A shorter mean duration at the same load means more arrivals a second.
    free = generate(TraceSpec(500, offered_load=1.0), GEN2, 2, seed=4)
    assert capped[-1].arrival < free[-1].arrival


def test_the_capped_mean_is_the_mean_of_capped_draws() -> None:
    rng = random.Random(5)
    draws = [min(rng.lognormvariate(6.0, 1.5), 2000.0) for _ in range(200_000)]
    assert lognormal_mean(6.0, 1.5, 2000.0) == pytest.approx(sum(draws) / len(draws), rel=0.01)
    assert lognormal_mean(6.0, 1.5, None) == pytest.approx(math.exp(6.0 + 1.5**2 / 2))
