"""The busy-fleet table: ratios to the anchor and to the empty fleet, and the verdicts."""

from typing import Any

from benchmarks.pages.controller import busy_table
from benchmarks.pages.scheduler import BUSY_ANCHOR, occupancy_notes, occupancy_part, occupancy_step
from tests.benchmarks.recorded import RUN


def run(ms: float, refused: str | None = "0/36 nodes are available") -> dict[str, Any]:
    return {
        "scheduler_cpu_ms_per_pod": ms,
        "pods_per_second": 1000 / ms,
        "slices": 72,
        "pods": 100,
        "held_server_refused": refused,
    }


def test_ratios_and_misses_follow_the_figures() -> None:
    occupancy = {
        "10": {
            "0": {"server pools": [run(10.0, None)], BUSY_ANCHOR: [run(8.0, None)]},
            "90": {"server pools": [run(30.0)], BUSY_ANCHOR: [run(10.0)]},
        }
    }
    text = "\n".join(occupancy_part(occupancy))
    assert "| 10 | 90% | server pools | 72 | 100 | 30.00 | 3.00 | 3.00 |" in text
    assert "| 10 | 0% | server pools | 72 | 100 | 10.00 | 1.25 | 1.00 |" in text
    assert "server pools at 10 racks, 90% held: over the anchor" in text
    assert "server pools at 10 racks: 90% over 0%" in text
    assert "racks, 0% held" not in text  # 1.25 is within 1.3
    assert "server pools at 10 racks, 90% held: 33.3 pods/s" not in text  # above 20
    slow = {**occupancy["10"]["90"]["server pools"][0], "pods_per_second": 4.0}
    occupancy["10"]["90"]["server pools"] = [slow]
    assert "server pools at 10 racks, 90% held: 4.0 pods/s" in "\n".join(occupancy_part(occupancy))


def test_a_layout_within_every_goal_is_not_listed() -> None:
    occupancy = {
        "1": {
            "0": {"server pools": [run(10.0, None)], BUSY_ANCHOR: [run(9.0, None)]},
            "90": {"server pools": [run(12.0)], BUSY_ANCHOR: [run(10.0)]},
        }
    }
    text = "\n".join(occupancy_part(occupancy))
    assert "Every layout meets them." in text
    assert "| 1 | 90% | server pools | 72 | 100 | 12.00 | 1.20 | 1.20 | 83.3 | 1/1 |" in text


def test_the_controller_page_shows_each_band() -> None:
    writes = {"slices": 0.01, "rack status": 0.008, "claim status": 1.0}
    band: dict[str, Any] = {
        "pools": "node",
        "racks": 10,
        "held_percent": 50,
        "claims": 1265,
        "seconds": 12.5,
        "cpu_ms_per_claim": 6.9,
        "writes_per_claim": writes,
    }
    busy = {
        "bands": [
            band,
            {**band, "held_percent": 90, "cpu_ms_per_claim": 5.7},
            {
                **band,
                "publishing": "order",
                "writes_per_claim": {**writes, "slices": 0.4},
            },
        ],
        "command": "make bench-controller BENCH_ARGS=--busy-only",
        "date": "2026-12-05",
        "conditions": {**RUN, "load_1min_before": 0.5, "load_1min_after": 2.4},
    }
    lines = busy_table(busy)
    # A band recorded before the publishing choice existed was published plain.
    assert "| node | plain | 50% | 1265 | 12.5 | 6.9 | 0.01 | 0.008 | 1.0 |" in lines
    assert "| node | plain | 90% | 1265 | 12.5 | 5.7 | 0.01 | 0.008 | 1.0 |" in lines
    assert "| node | order | 50% | 1265 | 12.5 | 6.9 | 0.4 | 0.008 | 1.0 |" in lines
    # Its own run, apart from the publishing figures above it, with its own conditions.
    assert "Command: `make bench-controller BENCH_ARGS=--busy-only` — 2026-12-05." in lines
    assert any(line.startswith("> **NOISY RUN.**") and "2.4 after" in line for line in lines)
    assert busy_table(None) == []


def test_each_fleet_size_names_the_run_that_measured_it() -> None:
    quiet = {
        "cpus": 2,
        "kubernetes_version": "v1.37.2",
        "git_commit": "abcdef1234",
        "load_1min_before": 0.5,
        "load_during_1min": {"samples": 3, "max": 1.2, "mean": 1.0},
        "load_1min_after": 0.8,
        "noisy": False,
    }
    earlier = {**quiet, "git_commit": "0123456789"}
    results = {
        "occupancy": {"10": {}, "100": {}},
        "loads": {"occupancy": earlier, occupancy_step(100): quiet},
    }
    text = "\n".join(occupancy_notes(results, ["10", "100"]))
    ten, hundred = text.split("The runs at 100 racks:")
    assert "The runs at 10 racks:" in ten and "commit 0123456789" in ten
    assert "commit abcdef1234" in hundred and "0123456789" not in hundred
