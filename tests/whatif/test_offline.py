"""The offline anchor on tiny racks whose outcome can be worked out by hand."""

import json
from dataclasses import replace
from pathlib import Path

import pytest

from simdevice.topology import TRAINIUM3, RackSpec
from whatif import cli as whatif
from whatif.figures import summarize, time_weighted
from whatif.fleet import Fleet
from whatif.jobs import Job, JobError, PodShape, offered
from whatif.offline import replay
from whatif.trace import read_trace

TWO_CHIPS = RackSpec("trn3-gen2", servers=1, chips_per_server=2, chip=TRAINIUM3)
TWO_SERVERS = RackSpec("trn3-gen2", servers=2, chips_per_server=2, chip=TRAINIUM3)


def job(name: str, arrival: float, shape: PodShape, duration: float, pods: int = 1) -> Job:
    return Job(name, arrival, pods, shape, duration)


def started(
    jobs: list[Job], rack: RackSpec, policy: str, gangs: bool = True
) -> dict[str, float | None]:
    run = replay(jobs, rack, 1, policy=policy, gangs=gangs)
    return {r.job.name: r.start for r in run.records}


def test_best_fit_keeps_a_whole_chip_for_the_chip_job_first_fit_breaks_it() -> None:
    jobs = [
        job("chip-short", 0, PodShape("chips", 1), 5),  # chip 0, gone at 5
        job("half-long", 0, PodShape("cores", 4), 100),  # chip 1, cores 0-3
        job("one-core", 6, PodShape("cores", 1), 100),  # first fit: chip 0; best fit: chip 1
        job("chip", 7, PodShape("chips", 1), 10),
    ]
    assert started(jobs, TWO_CHIPS, "best-fit")["chip"] == 7
    assert started(jobs, TWO_CHIPS, "first-fit")["chip"] == 100


def test_partitions_stay_aligned() -> None:
    fleet = Fleet(TWO_CHIPS, 1)
    one = fleet.place(PodShape("cores", 1), "first-fit")
    assert one is not None
    fleet.hold(one)
    two = fleet.place(PodShape("cores", 2), "first-fit")
    four = fleet.place(PodShape("cores", 4), "first-fit")
    assert two is not None and two.masks == (((0, 0, 0), 0b1100),)
    assert four is not None and four.masks == (((0, 0, 0), 0b11110000),)


def test_a_gang_takes_all_its_pods_at_once_or_nothing() -> None:
    jobs = [
        job("holder", 0, PodShape("chips", 1), 50),
        job("gang", 1, PodShape("chips", 1), 10, pods=2),
        job("single", 2, PodShape("cores", 1), 10),
    ]
    with_gangs = started(jobs, TWO_CHIPS, "first-fit")
    assert with_gangs == {"holder": 0, "gang": 50, "single": 2}
    without = started(jobs, TWO_CHIPS, "first-fit", gangs=False)
    # Without gangs the gang's first pod sits on the free chip and starves the single core.
    assert without == {"holder": 0, "gang": 50, "single": 60}


def test_a_rack_job_waits_for_the_whole_rack_and_a_server_for_its_server() -> None:
    jobs = [
        job("core", 0, PodShape("cores", 1), 30),
        job("rack", 1, PodShape("rack"), 10),
        job("server", 2, PodShape("server"), 5),
    ]
    # The server fits beside the core at once (nothing is reserved for the waiting rack).
    assert started(jobs, TWO_SERVERS, "first-fit") == {"core": 0, "rack": 30, "server": 2}


def test_a_job_too_big_for_the_fleet_is_refused_by_name() -> None:
    with pytest.raises(JobError, match=r"big.*3 chips per pod.*has 2"):
        replay([job("big", 0, PodShape("chips", 3), 1)], TWO_CHIPS, 1, policy="first-fit")
    with pytest.raises(JobError, match="2 whole racks"):
        replay([job("racks", 0, PodShape("rack"), 1, pods=2)], TWO_CHIPS, 1, policy="best-fit")


def test_allocation_and_fragmentation_follow_the_samples() -> None:
    jobs = [
        job("a", 0, PodShape("cores", 2), 10),
        job("b", 0, PodShape("cores", 2), 20),
        job("c", 1, PodShape("chips", 2), 5),
        job("d", 30, PodShape("cores", 1), 1),
    ]
    run = replay(jobs, TWO_CHIPS, 1, policy="first-fit")
    figures = summarize(run)
    assert {r.job.name: r.start for r in run.records} == {"a": 0, "b": 0, "c": 20, "d": 30}
    # 4 of 16 cores from 0 to 10, 2 from 10 to 20, 16 from 20 to 25, 0 to 30: the arrivals.
    assert figures["allocation_rate_while_arriving"] == pytest.approx(
        (4 * 10 + 2 * 10 + 16 * 5) / 16 / 30
    )
    # While c waits (1 to 20) its two whole chips are not there: every free core is unusable.
    assert figures["unusable_free_share_while_waiting"] == pytest.approx(1.0)
    assert figures["queueing_delay_s"]["p50"] == 0
    assert figures["jobs_run"] == 4 and figures["makespan_s"] == 31


def test_time_weighted_without_time_is_none() -> None:
    assert time_weighted([], lambda s: 1.0) is None


def test_a_site_without_a_partition_size_gives_the_next_size_up_or_a_chip() -> None:
    two = job("two", 0, PodShape("cores", 2), 10)
    assert offered(two, (1, 4)).shape == PodShape("cores", 4)
    assert offered(two, (1,)).shape == PodShape("chips", 1)
    assert offered(two, (1, 2)) == two
    assert offered(job("chip", 0, PodShape("chips", 1), 10), (1,)).shape == PodShape("chips", 1)
    assert offered(two, (1,)).duration == two.duration


def test_fewer_partition_sizes_hold_more_cores_for_the_same_jobs(tmp_path: Path) -> None:
    args = ["offline", "--racks", "1", "--jobs", "200", "--mix", "cores-2=1", "--load", "0.5"]
    for sizes in ("1,2,4", "1"):
        out = tmp_path / sizes
        assert whatif.main([*args, "--partition-sizes", sizes, "--out", str(out)]) == 0
    shapes = {s: {j.shape for j in read_trace(tmp_path / s / "trace.csv")} for s in ("1,2,4", "1")}
    assert shapes == {"1,2,4": {PodShape("cores", 2)}, "1": {PodShape("chips", 1)}}
    held = {
        s: json.loads((tmp_path / s / "result.json").read_text())["runs"][0][
            "allocation_rate_while_arriving"
        ]
        for s in ("1,2,4", "1")
    }
    assert held["1"] > 2 * held["1,2,4"]


def test_strict_fifo_holds_small_jobs_behind_a_waiting_rack_job_backfill_lets_them_by() -> None:
    """Three of four chips busy until 1,000, a rack job at 10, two single
    cores at 20 for 1,000 s. Backfill lets the cores into the free chip at
    once, and the rack job waits for them too (1,020); strict FIFO keeps them
    behind the rack job, which starts as the chips end."""
    chips = [job(f"chip-{i}", 0, PodShape("chips", 1), 1000) for i in range(3)]
    rack = job("rack", 10, PodShape("rack"), 500)
    cores = [job(f"core-{i}", 20, PodShape("cores", 1), 1000) for i in range(2)]
    fifo = replay([*chips, rack, *cores], TWO_SERVERS, 1, policy="best-fit", queueing="fifo")
    backfill = replay([*chips, rack, *cores], TWO_SERVERS, 1, policy="best-fit")
    assert {r.job.name: r.start for r in fifo.records} == {
        **{c.name: 0 for c in chips},
        "rack": 1000,
        "core-0": 1500,
        "core-1": 1500,
    }
    assert {r.job.name: r.start for r in backfill.records} == {
        **{c.name: 0 for c in chips},
        "rack": 1020,
        "core-0": 20,
        "core-1": 20,
    }
    assert fifo.queueing == "fifo" and backfill.queueing == "backfill"
    with pytest.raises(
        ValueError, match="queueing 'lifo': choose one of backfill, fifo, kueue-strict"
    ):
        replay(chips, TWO_SERVERS, 1, policy="best-fit", queueing="lifo")


def best_fit_starts(jobs: list[Job], queueings: tuple[str, ...]) -> dict[str, dict[str, float]]:
    """Each job's start under best fit on two servers, per queueing."""
    return {
        q: {
            r.job.name: r.start
            for r in replay(jobs, TWO_SERVERS, 1, policy="best-fit", queueing=q).records
            if r.start is not None
        }
        for q in queueings
    }


def test_kueue_admits_by_count_so_an_admitted_job_without_room_holds_its_quota() -> None:
    """Four chips busy at 0, one on each server ending at 100: at 150 a server
    job fits the quota (16 of 32 cores free) but no server is free. Without a
    quota a chip job at 200 takes a free chip at once; under either Kueue
    policy the server job holds the quota it cannot use yet, so the chip job
    waits until the long chips end at 1,000, like strict FIFO."""
    chips = [job(f"c{i}", 0, PodShape("chips", 1), 100 if i in (0, 3) else 1000) for i in range(4)]
    jobs = [
        *chips,
        job("server", 150, PodShape("server"), 500),
        job("chip", 200, PodShape("chips", 1), 300),
    ]
    starts = best_fit_starts(jobs, ("backfill", "kueue-strict", "kueue-best-effort"))
    held = {r.job.name: r.servers for r in replay(jobs, TWO_SERVERS, 1, policy="best-fit").records}
    assert held["c0"] != held["c3"], "the short chips sit on different servers"
    assert starts["backfill"]["chip"] == 200
    assert starts["kueue-strict"]["chip"] == starts["kueue-best-effort"]["chip"] == 1000
    assert {q: s["server"] for q, s in starts.items()} == dict.fromkeys(starts, 1000)


def test_kueue_strict_stops_admission_at_the_first_job_best_effort_passes_it_over() -> None:
    """The rack job of the strict-FIFO test: 24 of 32 cores busy, it needs 32.
    StrictFIFO admits nothing behind it; BestEffortFIFO admits the two cores
    (26 of 32), which then delay the rack job as backfill does."""
    chips = [job(f"chip-{i}", 0, PodShape("chips", 1), 1000) for i in range(3)]
    rack = job("rack", 10, PodShape("rack"), 500)
    cores = [job(f"core-{i}", 20, PodShape("cores", 1), 1000) for i in range(2)]
    starts = best_fit_starts([*chips, rack, *cores], ("kueue-strict", "kueue-best-effort"))
    assert (starts["kueue-strict"]["rack"], starts["kueue-strict"]["core-0"]) == (1000, 1500)
    assert (starts["kueue-best-effort"]["rack"], starts["kueue-best-effort"]["core-0"]) == (
        1020,
        20,
    )


def test_each_record_keeps_the_servers_its_job_held_and_the_figures_their_maxima() -> None:
    jobs = [job("gang", 0, PodShape("server"), 10, pods=2), job("late", 1, PodShape("rack"), 5)]
    run = replay(jobs, TWO_SERVERS, 1, policy="first-fit")
    records = {r.job.name: r.as_json() for r in run.records}
    assert records["gang"]["servers"] == [[0, 0], [0, 1]] and records["gang"]["start"] == 0
    assert records["late"] == {
        "name": "late",
        "arrival": 1,
        "pods": 1,
        "shape": "rack",
        "duration": 5,
        "priority": 0,
        "start": 10,
        "end": 15,
        "evictions": 0,
        "servers": [[0, 0], [0, 1]],
    }
    figures = summarize(run)
    assert figures["queueing_delay_s"]["max"] == 9 and figures["completion_time_s"]["max"] == 14


def test_kueue_admits_a_higher_priority_job_ahead_of_earlier_ones() -> None:
    """The strict-FIFO case with the cores in a higher priority: Kueue's
    queue puts them ahead of the waiting rack job, so StrictFIFO admits them
    at once (the rack job no longer heads the queue), while the bare
    scheduler's anchors ignore priority."""
    chips = [job(f"chip-{i}", 0, PodShape("chips", 1), 1000) for i in range(3)]
    rack = job("rack", 10, PodShape("rack"), 500)
    cores = [replace(job(f"core-{i}", 20, PodShape("cores", 1), 100), priority=5) for i in range(2)]
    starts = best_fit_starts([*chips, rack, *cores], ("kueue-strict", "fifo"))
    assert (starts["kueue-strict"]["rack"], starts["kueue-strict"]["core-0"]) == (1000, 20)
    assert (starts["fifo"]["rack"], starts["fifo"]["core-0"]) == (1000, 1500)
