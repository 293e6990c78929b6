"""Per-core health on the stand-in rack (testbed/examples/health.py)."""

import pytest

from testbed.examples.health import (
    test_a_failed_core_evicts_only_the_partition_over_it,
)

pytestmark = pytest.mark.integration

__all__ = [
    "test_a_failed_core_evicts_only_the_partition_over_it",
]
"""The checks collected here, against the stand-in `target` of conftest.py."""
