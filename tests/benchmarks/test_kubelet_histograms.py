"""The real-node benchmark's reading of the kubelet's DRA histograms: series
picked by label, summed over the rest, one driver's share taken by driver
label or as the difference between two scrapes, and summarised."""

import math

import pytest

from benchmarks.kubelet_histograms import Histogram, parse_histogram, quantile, summary_ms, total
from benchmarks.realnodes import (
    PREPARE,
    UNPREPARE,
    Phase,
    difference,
    histograms,
    own_histograms,
    pooled,
    summaries,
)
from benchmarks.realrack import prepare_figures
from testbed.realnodes import DRIVER

BOUNDS = ("0.1", "0.15", "0.5", "+Inf")


def series(
    metric: str, labels: dict[str, str], cumulative: tuple[int, ...], seconds: float
) -> list[str]:
    """One histogram series as the kubelet writes it (labels sorted, le last)."""
    text = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    lines = [
        f'{metric}_bucket{{{text},le="{le}"}} {count}'
        for le, count in zip(BOUNDS, cumulative, strict=True)
    ]
    lines.append(f"{metric}_sum{{{text}}} {seconds}")
    lines.append(f"{metric}_count{{{text}}} {cumulative[-1]}")
    return lines


GRPC = "dra_grpc_operations_duration_seconds"
STEP = "dra_operations_duration_seconds"


def grpc(driver: str, method: str, code: str, counts: tuple[int, ...], seconds: float) -> list[str]:
    labels = {"driver_name": driver, "grpc_status_code": code, "method_name": method}
    return series(GRPC, labels, counts, seconds)


def step(operation: str, counts: tuple[int, ...], seconds: float) -> list[str]:
    return series(STEP, {"is_error": "false", "operation_name": operation}, counts, seconds)


def scrape(*parts: list[str]) -> str:
    header = [f"# HELP {GRPC} Duration", f"# TYPE {GRPC} histogram"]
    return "\n".join(header + [line for part in parts for line in part]) + "\n"


def test_series_are_picked_by_label_and_summed_over_the_others() -> None:
    text = scrape(
        grpc("a.dev", PREPARE, "OK", (3, 4, 5, 5), 0.4),
        grpc("a.dev", PREPARE, "Unavailable", (0, 0, 1, 2), 1.5),
        grpc("b.dev", PREPARE, "OK", (7, 7, 7, 7), 0.2),
        grpc("a.dev", UNPREPARE, "OK", (9, 9, 9, 9), 0.1),
    )
    h = parse_histogram(text, GRPC, {"method_name": PREPARE, "driver_name": "a.dev"})
    assert h.buckets == {0.1: 3, 0.15: 4, 0.5: 6, math.inf: 7}
    assert h.sum == pytest.approx(1.9)
    assert h.count == 7


def test_another_metric_with_a_common_prefix_is_not_read() -> None:
    text = scrape(step("PrepareResources", (1, 1, 1, 1), 0.01))
    assert parse_histogram(text, GRPC, {}) == Histogram({}, 0.0, 0.0)


def test_nodes_add_up_and_a_later_scrape_minus_an_earlier_is_what_came_between() -> None:
    node_a = Histogram({0.1: 2, math.inf: 3}, 0.5, 3)
    node_b = Histogram({0.1: 1, math.inf: 1}, 0.05, 1)
    both = total([node_a, node_b])
    assert both == Histogram({0.1: 3, math.inf: 4}, 0.55, 4)
    later = both + Histogram({0.1: 5, math.inf: 6}, 0.7, 6)
    between = later - both
    assert between.buckets == {0.1: 5, math.inf: 6}
    assert between.sum == pytest.approx(0.7)
    assert between.count == 6


def test_counts_that_went_down_are_refused() -> None:
    before = Histogram({0.1: 5, math.inf: 5}, 0.2, 5)
    after = Histogram({0.1: 1, math.inf: 1}, 0.01, 1)
    with pytest.raises(ValueError, match="kubelet restarted"):
        after - before


def test_quantiles_interpolate_inside_the_bucket_like_prometheus() -> None:
    buckets = {0.1: 50.0, 0.2: 100.0, math.inf: 100.0}
    assert quantile(0.5, buckets) == pytest.approx(0.1)
    assert quantile(0.75, buckets) == pytest.approx(0.15)
    assert math.isnan(quantile(0.5, {}))


def test_the_summary_shows_how_coarse_the_quantiles_are_and_the_exact_mean() -> None:
    h = Histogram({0.1: 4, 0.15: 4, math.inf: 4}, 0.02, 4)
    s = summary_ms(h)
    assert s["p50"] == pytest.approx(50.0)  # only the bucket's bounds, not the calls
    assert s["p99"] == pytest.approx(99.0)
    assert s["mean"] == pytest.approx(5.0)
    assert s["in_lowest_bucket"] == 1.0
    assert s["lowest_bucket_ms"] == pytest.approx(100.0)
    assert s["count"] == 4


def test_two_phases_split_by_driver_label_and_by_difference() -> None:
    """Ours runs between the first and second scrape, the Go plugin between
    the second and third; the step metric carries no driver label."""
    first = scrape(step("PrepareResources", (5, 5, 5, 5), 0.005))  # pods without claims
    second = scrape(
        grpc("ours.dev", PREPARE, "OK", (1, 2, 2, 2), 0.16),
        grpc("ours.dev", UNPREPARE, "OK", (2, 2, 2, 2), 0.01),
        step("PrepareResources", (6, 7, 7, 7), 0.18),
        step("UnprepareResources", (2, 2, 2, 2), 0.012),
    )
    third = scrape(
        grpc("ours.dev", PREPARE, "OK", (1, 2, 2, 2), 0.16),
        grpc("ours.dev", UNPREPARE, "OK", (2, 2, 2, 2), 0.01),
        grpc("go.dev", PREPARE, "OK", (2, 2, 2, 2), 0.02),
        grpc("go.dev", UNPREPARE, "OK", (2, 2, 2, 2), 0.02),
        step("PrepareResources", (8, 9, 9, 9), 0.21),
        step("UnprepareResources", (4, 4, 4, 4), 0.036),
    )
    ours = summaries(difference(histograms([second], "ours.dev"), histograms([first], "ours.dev")))
    go = summaries(difference(histograms([third], "go.dev"), histograms([second], "go.dev")))
    assert ours["kubelet_grpc_ms"]["prepare"]["count"] == 2
    assert ours["kubelet_grpc_ms"]["prepare"]["mean"] == pytest.approx(80.0)
    assert ours["kubelet_step_ms"]["prepare"]["count"] == 2  # the five claimless pods drop out
    assert ours["kubelet_step_ms"]["prepare"]["mean"] == pytest.approx(87.5)
    assert go["kubelet_grpc_ms"]["prepare"]["count"] == 2
    assert go["kubelet_grpc_ms"]["prepare"]["mean"] == pytest.approx(10.0)
    assert go["kubelet_step_ms"]["prepare"]["mean"] == pytest.approx(15.0)
    assert go["kubelet_step_ms"]["unprepare"]["mean"] == pytest.approx(12.0)


def test_rounds_pool_into_one_histogram_per_series_and_keep_every_start_up() -> None:
    one = Phase({"kubelet_grpc_ms": {"prepare": Histogram({0.1: 1, math.inf: 2}, 0.3, 2)}}, [1.0])
    two = Phase({"kubelet_grpc_ms": {"prepare": Histogram({0.1: 3, math.inf: 3}, 0.1, 3)}}, [2.0])
    both = pooled([one, two])
    assert both.seen["kubelet_grpc_ms"]["prepare"] == Histogram({0.1: 4, math.inf: 5}, 0.4, 5)
    summary = both.summary()
    assert summary["kubelet_grpc_ms"]["prepare"]["mean"] == pytest.approx(80.0)
    assert summary["pod_startup_s"] == [1.0, 2.0]


def test_each_plugins_own_histogram_is_read_by_its_own_name() -> None:
    ours_metric = "trainium_dra_node_request_duration_seconds"
    before = scrape(series(ours_metric, {"node": "n0", "operation": "prepare"}, (1, 1, 1, 1), 0.01))
    after = scrape(
        series(ours_metric, {"node": "n0", "operation": "prepare"}, (3, 3, 3, 3), 0.03),
        series(ours_metric, {"node": "n0", "operation": "unprepare"}, (2, 2, 2, 2), 0.004),
        series(
            "dra_example_driver_prepare_claim_duration_seconds",
            {"result": "success"},
            (9, 9, 9, 9),
            9.0,
        ),
    )
    ours = summaries(
        difference(
            {"plugin_own_ms": own_histograms([after], "ours")},
            {"plugin_own_ms": own_histograms([before], "ours")},
        )
    )["plugin_own_ms"]
    assert ours["prepare"]["count"] == 2
    assert ours["prepare"]["mean"] == pytest.approx(10.0)
    assert ours["unprepare"]["mean"] == pytest.approx(2.0)
    go = own_histograms([after], "go")
    assert go["prepare"].count == 9
    assert go["unprepare"].count == 0


def test_a_rack_phase_counts_only_the_kubelets_that_answered_both_scrapes() -> None:
    def node(count: int, seconds: float) -> str:
        return scrape(grpc(DRIVER, PREPARE, "OK", (count,) * 4, seconds))

    before = {"n0": node(1, 0.01), "n1": node(2, 0.02), "n2": node(0, 0.0)}
    after = {"n0": node(3, 0.05), "n2": node(10, 0.5)}  # n1's kubelet did not answer
    figures = prepare_figures(before, after)
    assert figures["kubelets_read"] == 2
    prepare = figures["calls"]["prepare"]
    assert prepare["count"] == 12
    assert prepare["mean"] == pytest.approx(1000 * (0.04 + 0.5) / 12)
