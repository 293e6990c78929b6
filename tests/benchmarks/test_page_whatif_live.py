"""The live replays' block states each case beside the anchor and where its
CPU went, from the results alone."""

from typing import Any

from benchmarks.pages import whatif_live


def run(policy: str, allocation: float, p50: float) -> dict[str, Any]:
    return {
        "policy": policy,
        "jobs_run": 30,
        "jobs_never_run": 1,
        "evictions": 2 if policy == "kube-scheduler" else 0,
        "allocation_rate_while_arriving": allocation,
        "queueing_delay_s": {"p50": p50, "p90": 2 * p50},
    }


CASE = {
    "what": "1 rack, a test",
    "date": "2026-12-05 00:20",
    "wall_seconds": 200.0,
    "speedup": 50.0,
    "cpus": 2,
    "load_1min": {"before": 0.5, "after": 3.25},
    "bind_latency_wall_s": {"p50": 1.5},
    "runs": [run("kube-scheduler", 0.6, 40), run("first-fit", 0.61, 0), run("best-fit", 0.65, 0)],
    "cpu_seconds_by_process": {"etcd": 5.0, "kube-scheduler": 150.0, "kube-apiserver": 90.0},
    "scheduler_attempts": {
        "scheduled": {"attempts": 31.0, "seconds": 3.0},
        "unschedulable": {"attempts": 9.0, "seconds": 1.0},
    },
}
PAGE = "before\n<!-- live:start -->\nold\n<!-- live:end -->\nafter\n"


def test_each_case_is_a_row_beside_the_anchor_with_where_its_cpu_went() -> None:
    payload = {
        "command": "make x",
        "machine": {"cpus": 2, "date": "d"},
        "results": {"cases": {"c": CASE}},
    }
    page = whatif_live.render(PAGE, payload)
    assert page.startswith("before\n") and page.endswith("after\n") and "old" not in page
    assert (
        "| `c` | 30 / 1 | 200 (50.0x) | 60.0% / 61.0% / 65.0% | -5.0 | 40 / 80 | 0 / 0 | 1.5 | 2 |"
        in page
    )
    assert "used 245 CPU seconds of the 400" in page
    assert "most: kube-scheduler 150, kube-apiserver 90, etcd 5" in page
    assert "scheduled 31, 75% of its attempt time; unschedulable 9, 25% of its attempt time" in page
