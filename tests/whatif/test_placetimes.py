"""Job time by placement, worked by hand from the fabric's figures
(simdevice.fabric, docs/simulator.md "Collectives"): a two-rank all-reduce of
S bytes runs as a ring of one step each way, 2 x (latency + S / 2 / bandwidth)
= 2 latency + S / bandwidth, at the level between the two chips."""

import json
from pathlib import Path

import pytest

from benchmarks.paths import ROOT
from simdevice.fabric import RankPlace, first_chips
from simdevice.topology import rack_spec
from simdevice.workloads import train_step_comm
from whatif import cli as whatif
from whatif.figures import summarize
from whatif.fleet import Fleet
from whatif.jobs import Job, JobError, PodShape
from whatif.jobtimes import parse_work, timed
from whatif.offline import replay
from whatif.placetimes import (
    _COLLECTIVES,
    compute_seconds,
    duration_on,
    gradient_bytes,
    level_signature,
    packed_duration,
    packed_places,
    places_of,
    replace_iterations,
    spread_seconds,
)
from whatif.report import SPREAD_LOST

GEN2 = rack_spec("trn3-gen2")
SMALL = parse_work('{"kind": "train-step", "hidden": 256, "seq": 256, "iterations": 100}')
LARGE = parse_work('{"kind": "train-step", "hidden": 1024, "seq": 256, "iterations": 100}')
ONE_SERVER = (RankPlace(0, 0, 0), RankPlace(0, 0, 1))
TWO_SERVERS = (RankPlace(0, 0, 0), RankPlace(0, 1, 0))
TWO_RACKS = (RankPlace(0, 0, 0), RankPlace(1, 0, 0))


def by_hand(latency: float, bandwidth: float, size: float) -> float:
    return 2 * latency + size / bandwidth


def test_a_two_chip_job_runs_longest_across_racks_and_shortest_in_one_server() -> None:
    job = Job("pair", 0, 2, PodShape("chips", 1), 1.0, SMALL)
    size = gradient_bytes(SMALL)  # 12 x 256^2 BF16 values: 1,572,864 bytes
    assert size == 1_572_864
    compute = compute_seconds(replace_iterations(SMALL, 1), GEN2, 2, PodShape("chips", 1))
    steps = {
        "one server": by_hand(1e-6, 256e9, size),  # 8.14 us
        "two servers": by_hand(2e-6, 320e9, size),  # 8.92 us
        "two racks": by_hand(2e-6, 128e9, size),  # 16.29 us: chip 0 of each, the direct link
    }
    places = {"one server": ONE_SERVER, "two servers": TWO_SERVERS, "two racks": TWO_RACKS}
    for where, step in steps.items():
        assert duration_on(job, GEN2, places[where]) == pytest.approx(100 * (compute + step))
    assert packed_places(2, PodShape("chips", 1), GEN2) == ONE_SERVER
    assert packed_duration(job, GEN2) == duration_on(job, GEN2, ONE_SERVER)
    assert spread_seconds(job, GEN2, ONE_SERVER) == 0
    lost = spread_seconds(job, GEN2, TWO_RACKS)
    assert lost == pytest.approx(100 * (steps["two racks"] - steps["one server"]))
    assert 0 < spread_seconds(job, GEN2, TWO_SERVERS) < lost


def test_racks_holding_the_ranks_in_different_places_also_cross_the_far_rack() -> None:
    job = Job("pair", 0, 2, PodShape("chips", 1), 1.0, SMALL)
    size = gradient_bytes(SMALL)
    apart = (RankPlace(0, 0, 0), RankPlace(1, 1, 0))
    # The direct link joins chips in the same place; else a step also crosses
    # the far rack's inter-server switches: latencies add, the slowest bandwidth.
    extra = by_hand(4e-6, 128e9, size) - by_hand(2e-6, 128e9, size)
    assert duration_on(job, GEN2, apart) - duration_on(job, GEN2, TWO_RACKS) == pytest.approx(
        100 * extra
    )


def test_a_large_gradient_all_reduces_faster_across_two_gen2_servers_than_in_one() -> None:
    """The model's sourced figures: inter-server links (320 GB/s a chip) are
    faster than the server's switch (256 GB/s), so where bandwidth dominates
    a looser placement wins, and the loss to spread is negative."""
    job = Job("pair", 0, 2, PodShape("chips", 1), 1.0, LARGE)
    size = gradient_bytes(LARGE)
    gain = by_hand(1e-6, 256e9, size) - by_hand(2e-6, 320e9, size)
    assert gain > 0
    assert spread_seconds(job, GEN2, TWO_SERVERS) == pytest.approx(-100 * gain)


def test_a_job_without_work_keeps_its_trace_duration_wherever_it_lands() -> None:
    job = Job("plain", 0, 2, PodShape("chips", 1), 42.0)
    for places in (ONE_SERVER, TWO_SERVERS, TWO_RACKS):
        assert duration_on(job, GEN2, places) == 42.0
        assert spread_seconds(job, GEN2, places) == 0


def test_the_packed_duration_is_the_one_timed_on_the_first_chips() -> None:
    """On one rack the tightest placement is the rack's first chips, where
    `workload_timing` times a workload's collectives."""
    size = gradient_bytes(SMALL)
    comm, _ = train_step_comm(SMALL, GEN2, 2)
    assert comm == pytest.approx(by_hand(1e-6, 256e9, size))
    assert list(packed_places(2, PodShape("chips", 1), GEN2)) == first_chips(GEN2, 2)
    assert list(packed_places(2, PodShape("server"), GEN2)) == first_chips(GEN2, 8)
    job = Job("pair", 0, 2, PodShape("chips", 1), 1.0, SMALL)
    assert timed(job, GEN2).duration == packed_duration(job, GEN2)


def test_core_pods_of_one_job_pack_onto_one_chip_and_talk_to_no_one() -> None:
    assert packed_places(4, PodShape("cores", 2), GEN2) == (RankPlace(0, 0, 0),)
    assert len(packed_places(2, PodShape("rack"), GEN2)) == 2 * GEN2.chips


def test_a_collective_is_timed_once_per_level_signature() -> None:
    job = Job("pair", 0, 2, PodShape("chips", 1), 1.0, SMALL)
    elsewhere = (RankPlace(3, 5, 2), RankPlace(3, 5, 3))  # one server too
    assert level_signature(elsewhere) == level_signature(ONE_SERVER)
    duration_on(job, GEN2, ONE_SERVER)
    before = len(_COLLECTIVES)
    assert duration_on(job, GEN2, elsewhere) == duration_on(job, GEN2, ONE_SERVER)
    assert len(_COLLECTIVES) == before


def test_work_on_more_chips_than_the_job_holds_is_refused_by_field() -> None:
    work = parse_work('{"kind": "train-step", "hidden": 256, "seq": 256, "chips": 4}')
    with pytest.raises(JobError, match="chips is 4, but the job holds 2"):
        duration_on(Job("j", 0, 2, PodShape("chips", 1), 1.0, work), GEN2, ONE_SERVER)


def test_a_trn2_job_spanning_racks_is_refused_as_efa_is_not_modelled() -> None:
    trn2 = rack_spec("trn2")
    with pytest.raises(JobError, match="no chip-to-chip link"):
        duration_on(Job("j", 0, 2, PodShape("chips", 1), 1.0, SMALL), trn2, TWO_RACKS)


def test_the_spread_rule_puts_a_pair_in_two_racks_and_the_offline_replay_times_it_there() -> None:
    fleet = Fleet(GEN2, 2)
    first = fleet.place(PodShape("chips", 1), "spread")
    assert first is not None
    fleet.hold(first)
    second = fleet.place(PodShape("chips", 1), "spread")
    assert second is not None
    assert places_of([first, second]) == TWO_RACKS

    job = timed(Job("pair", 0, 2, PodShape("chips", 1), 1.0, SMALL), GEN2)
    runs = {p: replay([job], GEN2, 2, policy=p) for p in ("first-fit", "spread")}
    ends = {p: run.records[0].end for p, run in runs.items()}
    assert ends["first-fit"] == pytest.approx(packed_duration(job, GEN2))
    assert ends["spread"] == pytest.approx(duration_on(job, GEN2, TWO_RACKS))
    lost = {p: summarize(run)["spread_lost_job_s"] for p, run in runs.items()}
    assert lost["first-fit"] == {"total": 0.0, "p50": 0.0, "p90": 0.0, "jobs": 1}
    assert lost["spread"]["total"] == pytest.approx(spread_seconds(job, GEN2, TWO_RACKS))


def test_a_replay_of_jobs_without_work_reports_no_spread() -> None:
    run = replay([Job("plain", 0, 2, PodShape("chips", 1), 5.0)], GEN2, 2, policy="spread")
    assert run.records[0].end == 5.0
    assert "spread_lost_job_s" not in summarize(run)


def test_offline_with_spread_writes_the_lost_job_seconds_per_rule(tmp_path: Path) -> None:
    trace = ROOT / "benchmarks" / "traces" / "packed-versus-spread.csv"
    args = ["offline", "--trace", str(trace), "--racks", "2", "--with-spread"]
    assert whatif.main([*args, "--out", str(tmp_path)]) == 0
    result = json.loads((tmp_path / "result.json").read_text())
    lost = {(r["policy"], r["queueing"]): r["spread_lost_job_s"]["total"] for r in result["runs"]}
    assert {p for p, _ in lost} == {"first-fit", "best-fit", "spread"}
    assert lost["spread", "backfill"] > lost["first-fit", "backfill"]
    spread = result["jobs"]["spread backfill, gangs on"]
    assert sum(j["spread_s"] for j in spread) == pytest.approx(lost["spread", "backfill"])
    assert SPREAD_LOST in (tmp_path / "report.md").read_text()
