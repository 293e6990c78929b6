"""Conditions as a benchmark records them, for the tests that render pages:
a page shows no figure whose run did not record them."""

from typing import Any, Final

RUN: Final[dict[str, Any]] = {
    "cpus": 2,
    "kubernetes_version": "v1.37.2",
    "git_commit": "0123456789abcdef",
    "git_dirty": False,
    "load_1min_before": 0.4,
    "load_during_1min": {"samples": 30, "max": 1.9, "mean": 1.2},
    "load_1min_after": 0.9,
    "noisy": False,
}
"""A quiet run's conditions: load, release and commit."""
