"""The kubelet's Prometheus histograms as plain data: read from the text
format, summed over nodes, subtracted between two scrapes, summarised.

Subtraction is what separates two drivers when the kubelet does not label a
metric by driver (`dra_operations_duration_seconds` covers all claims of a
pod): scrape after the first driver's pods, scrape again after the second's,
and the difference is the second's. Pure: text in, numbers out.
"""

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Histogram:
    """Cumulative bucket counts (upper bound -> count), the sum of the
    observations and their count."""

    buckets: dict[float, float] = field(default_factory=dict)
    sum: float = 0.0
    count: float = 0.0

    def __add__(self, other: "Histogram") -> "Histogram":
        bounds = self.buckets.keys() | other.buckets.keys()
        return Histogram(
            {le: self.buckets.get(le, 0.0) + other.buckets.get(le, 0.0) for le in bounds},
            self.sum + other.sum,
            self.count + other.count,
        )

    def __sub__(self, earlier: "Histogram") -> "Histogram":
        """What was observed after `earlier`, a scrape of the same series; a
        counter that went down means the kubelet restarted in between."""
        if earlier.count > self.count or any(
            count > self.buckets.get(le, 0.0) for le, count in earlier.buckets.items()
        ):
            raise ValueError(
                "histogram counts went down between scrapes (the kubelet restarted?): "
                f"{earlier.count:.0f} observations before, {self.count:.0f} after"
            )
        return Histogram(
            {le: count - earlier.buckets.get(le, 0.0) for le, count in self.buckets.items()},
            self.sum - earlier.sum,
            self.count - earlier.count,
        )


def total(histograms: Iterable[Histogram]) -> Histogram:
    out = Histogram()
    for h in histograms:
        out = out + h
    return out


def _labels(text: str) -> dict[str, str]:
    return dict(part.split("=", 1) for part in text.replace('"', "").split(",") if "=" in part)


def parse_histogram(text: str, metric: str, match: dict[str, str]) -> Histogram:
    """`metric`'s series whose labels include `match`, summed over the other
    labels (all series of one scrape share the same bucket bounds)."""
    buckets: dict[float, float] = {}
    sums = counts = 0.0
    for line in text.splitlines():
        if not line.startswith(f"{metric}_") or "{" not in line:
            continue
        name, rest = line.split("{", 1)
        labels_text, value = rest.rsplit("} ", 1)
        labels = _labels(labels_text)
        if any(labels.get(k) != v for k, v in match.items()):
            continue
        suffix = name.removeprefix(f"{metric}_")
        if suffix == "bucket":
            le = math.inf if labels["le"] == "+Inf" else float(labels["le"])
            buckets[le] = buckets.get(le, 0.0) + float(value)
        elif suffix == "sum":
            sums += float(value)
        elif suffix == "count":
            counts += float(value)
    return Histogram(buckets, sums, counts)


def quantile(q: float, buckets: dict[float, float]) -> float:
    """Prometheus' histogram_quantile: linear inside the bucket holding rank q."""
    bounds = sorted(buckets)
    all_count = buckets[bounds[-1]] if bounds else 0.0
    if all_count == 0:
        return math.nan
    rank, lower, below = q * all_count, 0.0, 0.0
    for le in bounds:
        count = buckets[le]
        if count >= rank:
            if math.isinf(le):
                return lower
            return lower + (le - lower) * (rank - below) / max(count - below, 1e-12)
        lower, below = le, count
    return lower


def bucket_of(q: float, buckets: dict[float, float]) -> tuple[float, float]:
    """(lower, upper) bound of the bucket holding rank q: all a histogram knows
    of that quantile; two quantiles in one bucket cannot be told apart."""
    bounds = sorted(buckets)
    all_count = buckets[bounds[-1]] if bounds else 0.0
    if all_count == 0:
        return math.nan, math.nan
    lower = 0.0
    for le in bounds:
        if buckets[le] >= q * all_count:
            return lower, le
        lower = le
    return lower, math.inf


def summary_ms(h: Histogram) -> dict[str, Any]:
    """p50 and p99 as histogram_quantile gives them with the bounds of the
    bucket each falls in, the exact mean from the sum and count (finer than the
    buckets), the count, and the share of observations in the lowest bucket
    (how much the quantiles can resolve)."""
    lowest = min(h.buckets) if h.buckets else math.inf
    return {
        "p50": 1e3 * quantile(0.5, h.buckets),
        "p99": 1e3 * quantile(0.99, h.buckets),
        "p50_bucket": [1e3 * b for b in bucket_of(0.5, h.buckets)],
        "p99_bucket": [1e3 * b for b in bucket_of(0.99, h.buckets)],
        "mean": 1e3 * h.sum / h.count if h.count else math.nan,
        "count": h.count,
        "lowest_bucket_ms": 1e3 * lowest,
        "in_lowest_bucket": h.buckets.get(lowest, 0.0) / h.count if h.count else math.nan,
    }
