"""Where a live replay and an anchor part, job by job, with the cause read
from the two fleets, and the job-seconds each lost to spread: worked out
by hand on a two-server rack."""

from simdevice.topology import TRAINIUM3, RackSpec
from whatif.jobdiff import diff
from whatif.jobs import Job, PodShape
from whatif.jobtimes import parse_work, timed
from whatif.offline import replay
from whatif.replay import JobRecord, Replay, Sample
from whatif.report import diffs

RACK = RackSpec("trn3-gen2", servers=2, chips_per_server=2, chip=TRAINIUM3)
CORES = RACK.chips * RACK.chip.cores


def live_replay(records: list[JobRecord], samples: list[Sample]) -> Replay:
    return Replay(RACK, 1, "kube-scheduler", True, tuple(records), tuple(samples))


def test_each_job_that_parts_is_named_with_its_cause() -> None:
    chip = Job("chip", 0, 1, PodShape("chips", 1), 100)
    rack = Job("rack", 5, 1, PodShape("rack"), 10)
    late = Job("x-late", 5, 1, PodShape("server"), 10)
    anchor = replay([chip, rack, late], RACK, 1, policy="best-fit", queueing="fifo")
    # The rack waits for the chip until 100, and strict FIFO holds the server
    # job behind it although the other server is free.
    assert {r.job.name: r.start for r in anchor.records} == {"chip": 0, "rack": 100, "x-late": 110}
    live = live_replay(
        [
            JobRecord(chip, 0, 100, servers=[(0, 0), (0, 1)]),
            JobRecord(rack, None, None),
            JobRecord(late, 5, 15, servers=[(0, 1)]),
        ],
        [Sample(0, 8, 1, None), Sample(5, 24, 1, None), Sample(15, 8, 1, None)],
    )
    found = diff(live, anchor)
    assert found["anchor"] == "best-fit fifo" and (found["jobs"], found["alike"]) == (3, 0)
    assert found["causes"] == {"spread": 1, "anchor-only": 1, "earlier-fifo": 1}
    assert [d["name"] for d in found["largest"]] == ["rack", "x-late", "chip"]
    late_diff = found["largest"][1]
    assert (late_diff["live_start"], late_diff["anchor_start"]) == (5, 110)


def test_a_later_start_is_fragmentation_with_cores_free_and_fullness_without() -> None:
    a = Job("a", 0, 1, PodShape("server"), 10)
    b = Job("b", 0, 1, PodShape("server"), 10)
    anchor = replay([a, b], RACK, 1, policy="best-fit")
    fragmented = live_replay(
        [JobRecord(a, 0, 10), JobRecord(b, 20, 30)], [Sample(0, 8, 1, None), Sample(10, 0, 1, None)]
    )
    full = live_replay(
        [JobRecord(a, 0, 10), JobRecord(b, 20, 30)],
        [Sample(0, CORES, 1, None), Sample(20, 16, 0, None)],
    )
    assert diff(fragmented, anchor)["causes"] == {"later-fragmented": 1}
    assert diff(full, anchor)["causes"] == {"later-fuller": 1}


def test_the_job_seconds_lost_to_spread_stand_live_beside_the_anchor() -> None:
    work = parse_work('{"kind": "train-step", "hidden": 128, "seq": 256, "iterations": 10}')
    pair = timed(Job("pair", 0, 2, PodShape("chips", 1), 1.0, work), RACK)
    anchor = replay([pair], RACK, 1, policy="best-fit")  # both chips of one server: none lost
    live = live_replay(
        [JobRecord(pair, 0, pair.duration + 4.0, servers=[(0, 0), (0, 1)], spread_seconds=4.0)],
        [Sample(0, 16, 0, None), Sample(pair.duration + 4.0, 0, 0, None)],
    )
    found = diff(live, anchor)
    assert found["spread_lost_job_s"] == {"live": 4.0, "anchor": 0.0}
    result = {"diff": [found]}
    assert "Job-seconds lost to spread: live 4, anchor 0." in diffs(result)
    plain = Job("plain", 0, 1, PodShape("chips", 1), 10)
    without = diff(
        live_replay([JobRecord(plain, 0, 10)], []), replay([plain], RACK, 1, policy="best-fit")
    )
    assert "spread_lost_job_s" not in without
