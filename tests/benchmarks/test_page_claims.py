"""The pages claim only what their data supports: projections need three rack
counts and show each point's offset, a peak is the largest reading, a
withdrawn anchor is not shown, histogram quantiles get their bucket and no
ratio, a handful of packing runs gives no worst share, and a what-if column
that tells no rule from another is left out."""

import math
from typing import Any

from benchmarks.kubelet_histograms import Histogram, bucket_of, summary_ms
from benchmarks.pages import controller, realnodes, realrack, scale, scheduler, whatif
from benchmarks.scalefit import SCHEDULER_RACKS, fit
from tests.benchmarks.recorded import RUN
from whatif.report import MAKESPAN, table

MIB = 2**20


def test_two_points_do_not_project() -> None:
    assert not fit([(1, 409.4), (10, 2454.5)]).projects()
    assert fit([(1, 1.0), (10, 10.0), (100, 100.0)]).projects()


def test_offsets_say_how_far_each_point_is_from_its_line() -> None:
    line = fit([(1, 178.4), (10, 225.8), (100, 236.7)])
    offsets = line.offsets()
    assert len(offsets) == 3
    assert max(abs(o) for o in offsets) > 0.1  # memory is not linear in racks
    exact = fit([(1, 42.0), (10, 420.0), (100, 4200.0)])
    assert all(abs(o) < 1e-9 for o in exact.offsets())


def publish_point(racks: int, seconds: float, rss: int, **extra: Any) -> dict[str, Any]:
    return {
        "racks": racks,
        "slices": 42 * racks,
        "seconds": seconds,
        "slice_writes": 42 * racks,
        "status_writes": racks,
        "apiserver_slice_writes": 42 * racks,
        "requests": {"resourceslices LIST": 1},
        "controller_rss_bytes": rss,
        **extra,
    }


def controller_payload(points: list[dict[str, Any]]) -> dict[str, Any]:
    machine = {"cpus": 2, "date": "2026-12-03", "python": "3.11.7"}
    return {
        "command": "make bench-controller",
        "machine": machine,
        "conditions": RUN,
        "results": {"publish": points},
    }


def scheduler_run(ms_per_claim: dict[int, float]) -> dict[str, Any]:
    """`make bench-scale`'s results: 64 single-core claims at each rack count."""
    return {
        "command": "make bench-scale",
        "machine": {"cpus": 2, "date": "2026-12-03", "python": "3.11.7"},
        "conditions": RUN,
        "results": {
            "scheduler": [
                {"racks": n, "claims": 64, "ms_per_claim": ms} for n, ms in ms_per_claim.items()
            ]
        },
    }


def test_scheduler_from_two_rack_counts_is_shown_and_not_projected() -> None:
    points = [publish_point(n, 5.0 + n, 200 * MIB) for n in (1, 10, 100)]
    scale_run = scheduler_run({1: 409.4, 10: 2454.5})
    page = scale.document(controller_payload(points), scale_run, None)
    assert (
        "Scheduler wall time per single-core claim, first created to last bound (ms): "
        "1 rack: 409.40, 10 racks: 2,454.50; not projected" in page
    )
    assert "It holds 1 and 10 racks, 64 single-core claims at each, one run each;" in page
    assert f"measures {scale.spoken([str(n) for n in SCHEDULER_RACKS])} racks, smallest" in page
    assert "Too few rack counts to project" in page
    assert page.count("409") == 1, "the scheduler's figure is stated once"
    assert "pods a second" not in page
    assert "| Scheduler wall time per single-core claim" not in page
    assert "| Cold publish, controller start to every rack Ready (seconds) |" in page


def test_scheduler_from_three_rack_counts_is_projected_in_the_table() -> None:
    points = [publish_point(n, 5.0 + n, 200 * MIB) for n in (1, 10, 100)]
    scale_run = scheduler_run({1: 400.0, 4: 1000.0, 16: 3400.0})
    page = scale.document(controller_payload(points), scale_run, None)
    assert "| Scheduler wall time per single-core claim, first created to last bound (ms) |" in page
    assert "**Scheduler per-pod cost.** The table above projects it from 1, 4 and 16 racks" in page
    assert "Too few rack counts" not in page and "Not measured at several" not in page


def test_without_its_results_the_storage_section_names_what_measures_it() -> None:
    points = [publish_point(n, 5.0 + n, 200 * MIB) for n in (1, 10, 100)]
    page = scale.document(controller_payload(points), None, None, None)
    section = page.split("## What one rack stores in etcd, by layout\n")[1]
    assert section.startswith("\nNot measured: `make bench-storage`")
    assert "| layout |" not in section.split("## ")[0]


def test_the_etcd_fill_point_is_stated_once_from_the_compacted_measurement() -> None:
    points = [
        publish_point(
            n, 5.0 + n, 200 * MIB, storage={"etcd_db_bytes": n * MIB, "slice_json_bytes": n * MIB}
        )
        for n in (1, 10, 100)
    ]
    stored = {
        "command": "make bench-storage",
        "machine": {"cpus": 2, "date": "2026-12-04", "python": "3.11.7"},
        "conditions": RUN,
        "results": {
            "racks": 10,
            "runs": {
                "rack pools": [
                    {
                        "slices_per_rack": 42,
                        "slice_json_bytes_per_rack": 1.8 * MIB,
                        "etcd_bytes_per_rack": 1.3 * MIB,
                    }
                ]
            },
        },
    }
    page = scale.document(controller_payload(points), None, None, stored)
    assert "fills at" not in page
    assert "| rack pools | 42 | 1.800 | 1.300 | 1,575 | 6,302 | no |" in page


def test_the_largest_reading_is_the_peak() -> None:
    point = publish_point(
        100,
        98.0,
        242 * MIB,
        controller_peak_rss_bytes=232 * MIB,
        controller_rss_after_bytes=237 * MIB,
    )
    text = "\n".join(controller.memory(point))
    assert "242 MiB resident when every rack is Ready" in text
    assert "in the run (" in text and "242 MiB." in text
    later = publish_point(
        100,
        98.0,
        231 * MIB,
        controller_peak_rss_bytes=232 * MIB,
        controller_rss_after_bytes=237 * MIB,
    )
    assert "237 MiB." in "\n".join(controller.memory(later))


def test_a_withdrawn_anchor_figure_is_not_shown() -> None:
    anchor = {"seconds": 119.5, "rss_bytes": 11486433280, "rss_bytes_withdrawn": True}
    point = publish_point(100, 98.0, 231 * MIB, anchor=anchor)
    text = "\n".join(controller.memory(point))
    assert "withdrawn" in text
    assert "10954" not in text and "10,954" not in text


def test_the_anchor_heap_is_shown_when_measured() -> None:
    anchor = {"seconds": 119.5, "heap_inuse_bytes": 300 * MIB, "rss_bytes": 400 * MIB}
    point = publish_point(100, 98.0, 231 * MIB, anchor=anchor)
    text = "\n".join(controller.memory(point))
    assert "300 MiB of Go heap in use" in text and "400 MiB resident" in text


def test_repeated_runs_show_median_and_range() -> None:
    point = {
        "racks": 1,
        "runs": [publish_point(1, s, 200 * MIB) for s in (6.0, 7.5, 6.5)],
        "anchor_runs": [{"seconds": s, "cpu_seconds": 0.4} for s in (2.0, 2.2, 2.1)],
    }
    table = "\n".join(controller.publish_table([point]))
    assert "| 6.50 (6.00\u20137.50) | 2.10 (2.00\u20132.20) | 3.10x |" in table


def test_histogram_quantiles_give_their_buckets_and_no_ratio() -> None:
    ours = {"p50": 50.0, "p99": 99.0, "p50_bucket": [0.0, 100.0], "p99_bucket": [0.0, 100.0]}
    go = {"p50": 50.0, "p99": 198.0, "p50_bucket": [0.0, 100.0], "p99_bucket": [100.0, 250.0]}
    assert realnodes.bucket_cell(ours, go, "p50") == "≤ 100 / ≤ 100"
    assert realnodes.bucket_cell(ours, go, "p99") == "≤ 100 / 100 to 250"


def test_calls_above_the_lowest_bucket_are_counted_not_interpolated() -> None:
    ours = {"count": 300.0, "in_lowest_bucket": 296 / 300, "lowest_bucket_ms": 100.0}
    go = {"count": 300.0, "in_lowest_bucket": 1.0, "lowest_bucket_ms": 100.0}
    assert realnodes.over_lowest(ours, go) == "4 / 0 (> 100 ms)"
    finer = {**go, "lowest_bucket_ms": 0.5, "in_lowest_bucket": 0.0}
    assert realnodes.over_lowest(ours, finer) == "4 (> 100 ms) / 300 (> 0.5 ms)"


def test_the_real_node_mean_ratio_is_taken_round_by_round_and_its_median_decides() -> None:
    def rounds(*means: float) -> list[dict[str, object]]:
        return [{"kubelet_grpc_ms": {"prepare": {"mean": m}}} for m in means]

    r = {"rounds": {"ours": rounds(3.0, 1.0, 2.0), "go": rounds(2.0, 2.0, 2.0)}}
    ratios = realnodes.mean_ratios(r, "kubelet_grpc_ms", "prepare")
    assert ratios == [1.5, 0.5, 1.0]
    assert realnodes.goal(ratios) == "met"
    assert realnodes.goal([1.5, 0.5, 1.1]) == "not met"


def test_bucket_of_names_the_bucket_holding_the_rank() -> None:
    buckets = {0.1: 18.0, 0.25: 19.0, 0.5: 20.0, math.inf: 20.0}
    assert bucket_of(0.5, buckets) == (0.0, 0.1)
    assert bucket_of(0.99, buckets) == (0.25, 0.5)
    assert all(math.isnan(b) for b in bucket_of(0.5, {0.1: 0.0, math.inf: 0.0}))
    summary = summary_ms(Histogram(buckets, 1.0, 20.0))
    assert summary["p50_bucket"] == [0.0, 100.0]


def packing(n: int) -> list[dict[str, Any]]:
    return [
        {
            "seed": 7 + i,
            "claims": 300,
            "allocated_cores": 1140,
            "cores_requested": 1152,
            "ratio": 0.9896,
        }
        for i in range(n)
    ]


def test_three_packing_runs_give_no_worst_share() -> None:
    text = "\n".join(scheduler.packing_part(packing(3), 0.995))
    assert "3 of 3 runs below the goal" in text
    assert "worst" in text and "**" not in text
    assert text.count("| 0.9896 |") == 3


def test_ten_packing_runs_give_a_worst_share() -> None:
    text = "\n".join(scheduler.packing_part(packing(10), 0.995))
    assert "worst share **0.9896**" in text


def test_the_scheduler_section_names_the_steps_it_holds_no_figures_of() -> None:
    r = {"occupancy": {"1": {}}, "layouts": {"calibration": {"runs": []}}, "packing": []}
    assert scheduler.measured_steps(r) == ["occupancy", "calibration"]
    (line,) = scheduler.unmeasured_part(r)
    missing = "`layouts`, `orders`, `packing`, `binpack`, `racks`;"
    assert line.startswith(f"Steps not measured: {missing}")
    every: dict[str, Any] = {step: [1] for step in scheduler.STEPS}
    every["layouts"] = {"flat": {}, "calibration": {}}
    assert scheduler.unmeasured_part(every) == []


def test_the_real_rack_fill_says_how_far_it_got_and_what_each_pod_cost() -> None:
    fill = {
        "cores": 1152,
        "batch": 36,
        "budget_s": 480.0,
        "memory_floor_mib": 2048,
        "available_before_mib": 20000.0,
        "stopped": "the host's available memory fell below 2048 MiB",
        "steps": [
            {"pods": 36, "seconds": 20.0, "available_mib": 19600.0, "load_1min": 30.2},
            {"pods": 72, "seconds": 40.0, "available_mib": 19280.0, "load_1min": 95.7},
        ],
        "cpus": 2,
        "node_memory_full": {"n0": {"memory_mib": 300.0, "system_memory_mib": 120.0}},
        "delete_s": 33.0,
    }
    text = realrack.fill_text(fill)
    assert "72 of the rack's 1,152 cores held" in text
    assert "in 40 s (1.8 pods/s)" in text
    assert "fell by 720 MiB, 10.0 MiB per pod" in text
    assert "load average after each batch, on 2 CPUs: 30, 96." in text
    assert "stopped because the host's available memory fell below 2048 MiB" in text
    assert "no batch started after 480 s, none below 2,048 MiB of available memory" in text
    assert realrack.fill_text({**fill, "steps": [], "stopped": "x"}) == (
        "No pod of the fill ran: x."
    )


def test_the_real_rack_gang_says_when_its_pods_ran_and_their_jobs_started() -> None:
    gang = {
        "pods": 36,
        "nodes_used": 36,
        "create_to_all_running_s": 95.4,
        "create_to_all_started_s": 240.2,
        "waited_for_api": 12,
    }
    text = realrack.gang_text(gang)
    assert "all Running on 36 nodes 95 s after `kubectl apply`" in text
    assert "started on its node's daemon after 240 s (12 of them repeated" in text
    failed = {
        **gang,
        "stopped": "3 of 36 pods running: Job rack-train failed: BackoffLimitExceeded",
        "container_errors": {"error=workload API 422: workload.hidden": 2},
    }
    text = realrack.gang_text(failed)
    assert "did not all run: 3 of 36 pods running" in text
    assert "2 pods: `error=workload API 422: workload.hidden`" in text


def whatif_run(queueing: str, makespan: float, evictions: int = 0) -> dict[str, Any]:
    return {
        "policy": "best-fit",
        "queueing": queueing,
        "gangs": True,
        "jobs_run": 10,
        "jobs_never_run": 0,
        "makespan_s": makespan,
        "queueing_delay_s": {"p50": 0.0, "p90": 1.0, "p99": 2.0, "max": 3.0},
        "completion_time_s": {"p50": 5.0, "p90": 6.0, "max": 7.0},
        "allocation_rate_while_arriving": 0.8,
        "allocation_rate_while_waiting": 0.7,
        "unusable_free_share_while_waiting": 0.1,
        "failures": evictions,
        "evictions": evictions,
        "lost_core_hours": 1.5 * evictions,
    }


def test_a_makespan_alike_in_every_row_of_its_queueing_is_left_out_and_said() -> None:
    runs = [whatif_run("backfill", 100.2), whatif_run("backfill", 99.9), whatif_run("fifo", 140)]
    alike = whatif.alike_makespans(runs)
    assert alike == {"backfill": 100, "fifo": 140}
    assert "(backfill 100 s, fifo 140 s)" in whatif.makespan_note(alike)
    assert "makespan" not in table(runs, leave_out=(MAKESPAN,))
    assert whatif.alike_makespans([*runs, whatif_run("fifo", 150)]) == {}


def test_allocation_says_it_counts_evicted_attempts() -> None:
    assert "evicted attempts included" in table([whatif_run("backfill", 1)]).splitlines()[0]
    assert whatif.evictions_note([whatif_run("backfill", 1)]) == ""
    assert "allocation rises with failures" in whatif.evictions_note(
        [whatif_run("backfill", 1, evictions=2)]
    )
