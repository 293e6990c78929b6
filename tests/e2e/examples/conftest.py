"""One local cluster (a full Trn3 Gen2 rack, 36 nodes) for every example test
in this package: starting it is the slow part, and each test leaves it empty."""

from collections.abc import Iterator

import pytest

from tests.e2e.cluster import Cluster, running_cluster


@pytest.fixture(scope="package")
def cluster() -> Iterator[Cluster]:
    with running_cluster() as running:
        yield running
