"""Durations from the simulated cores: the same computation on each generation."""

from pathlib import Path

import pytest

from simdevice.timing import core_dma_bandwidth, core_timing
from simdevice.topology import TopologyError, rack_spec
from simdevice.workloads import workload_timing
from whatif import cli as whatif
from whatif.jobs import Job, JobError, PodShape
from whatif.jobtimes import parse_work, timed, with_work
from whatif.placetimes import compute_seconds, packed_duration, replace_iterations
from whatif.trace import read_trace, write_trace

GEN2, TRN2 = rack_spec("trn3-gen2"), rack_spec("trn2")
STEP = '{"kind": "train-step", "hidden": 1024, "seq": 1024, "iterations": 10}'


def test_a_job_that_computes_runs_as_long_as_its_work_takes_on_the_generation() -> None:
    work = parse_work(STEP)
    job = Job("j", 0, 2, PodShape("chips", 1), 1.0, work)
    on_gen2, on_trn2 = timed(job, GEN2), timed(job, TRN2)
    assert on_gen2.duration == pytest.approx(workload_timing(work, GEN2, 16, 2).duration)
    assert on_trn2.duration == pytest.approx(workload_timing(work, TRN2, 16, 2).duration)
    assert on_gen2.duration != on_trn2.duration
    assert timed(Job("plain", 0, 1, PodShape("cores", 1), 7.0), TRN2).duration == 7.0


def test_one_iteration_is_timed_once_per_workload_generation_and_shape() -> None:
    work = parse_work('{"kind": "train-step", "hidden": 512, "seq": 512, "iterations": 3}')
    jobs = [Job(f"j{i}", 0, 1, PodShape("chips", 2), 1.0, work) for i in range(5)]
    before = compute_seconds.cache_info()
    durations = {timed(j, GEN2).duration for j in jobs}
    after = compute_seconds.cache_info()
    assert len(durations) == 1
    assert after.misses - before.misses == 1 and after.hits - before.hits == 4


def test_iterations_fill_the_drawn_duration_on_the_reference_generation() -> None:
    work = parse_work(STEP)
    step = packed_duration(
        Job("j", 0, 1, PodShape("chips", 1), 1.0, replace_iterations(work, 1)), GEN2
    )
    job = with_work(Job("j", 0, 1, PodShape("chips", 1), 100 * step), work, GEN2)
    assert job.work is not None and job.work.iterations == 100
    assert job.duration == pytest.approx(100 * step)


def test_work_survives_the_trace_file(tmp_path: Path) -> None:
    job = with_work(Job("j", 0, 1, PodShape("cores", 4), 5.0), parse_work(STEP), GEN2)
    write_trace(tmp_path / "t.csv", [job])
    [again] = read_trace(tmp_path / "t.csv")
    assert again.work == job.work


def test_bad_work_names_the_field() -> None:
    with pytest.raises(JobError, match="not JSON"):
        parse_work("{train")
    with pytest.raises(JobError, match="hidden: required"):
        parse_work('{"kind": "train-step", "seq": 8}')


def test_the_same_trace_replayed_on_another_generation(tmp_path: Path) -> None:
    args = ["offline", "--racks", "1", "--jobs", "40", "--mix", "chips-1=1", "--work", STEP]
    assert whatif.main([*args, "--out", str(tmp_path / "gen2")]) == 0
    trace = tmp_path / "gen2" / "trace.csv"
    again = ["offline", "--trace", str(trace), "--racks", "1", "--generation", "trn2"]
    assert whatif.main([*again, "--out", str(tmp_path / "trn2")]) == 0
    gen2 = {j.name: j for j in read_trace(trace)}
    trn2 = {j.name: j for j in read_trace(tmp_path / "trn2" / "trace.csv")}
    assert gen2.keys() == trn2.keys()
    assert all(gen2[n].work == trn2[n].work for n in gen2)
    assert any(abs(gen2[n].duration - trn2[n].duration) > 1e-6 for n in gen2)


def test_trainium4_is_a_what_if_from_the_announced_ratios_only() -> None:
    trn4 = rack_spec("trn4-whatif", projected=True)
    v4, whatif4 = core_timing(GEN2.chip), core_timing(trn4.chip)
    assert whatif4.peak_flops("fp8") == pytest.approx(3 * v4.peak_flops("fp8"))
    assert whatif4.peak_flops("mxfp4") == pytest.approx(6 * v4.peak_flops("mxfp4"))
    assert whatif4.peak_flops("bf16") == v4.peak_flops("bf16")
    assert trn4.chip.hbm_bandwidth == 4 * GEN2.chip.hbm_bandwidth
    assert core_dma_bandwidth(trn4.chip) == 4 * core_dma_bandwidth(GEN2.chip)
    assert (trn4.servers, trn4.chips_per_server, trn4.chip.cores) == (36, 4, 8)
    with pytest.raises(TopologyError, match="unknown generation 'trn4-whatif'"):
        rack_spec("trn4-whatif")


def test_fp8_work_runs_faster_on_the_trainium4_what_if(tmp_path: Path) -> None:
    gemm = '{"kind": "gemm", "m": 4096, "n": 4096, "k": 4096, "dtype": "fp8", "iterations": 50}'
    args = ["offline", "--racks", "1", "--jobs", "20", "--mix", "chips-1=1", "--work", gemm]
    assert whatif.main([*args, "--out", str(tmp_path / "gen2")]) == 0
    trace = tmp_path / "gen2" / "trace.csv"
    again = ["offline", "--trace", str(trace), "--racks", "1", "--generation", "trn4-whatif"]
    assert whatif.main([*again, "--out", str(tmp_path / "trn4")]) == 0
    gen2 = {j.name: j.duration for j in read_trace(trace)}
    trn4 = {j.name: j.duration for j in read_trace(tmp_path / "trn4" / "trace.csv")}
    assert all(trn4[n] < gen2[n] for n in gen2)
