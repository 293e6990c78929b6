"""One small local rack shared by the chaos tests that need a whole cluster,
started once (a start and a stop cost most of a minute)."""

from collections.abc import Iterator

import pytest

from testbed.chaos.localrack import ChaosCluster, chaos_cluster

NODES = 4


@pytest.fixture(scope="session")
def chaos_rack() -> Iterator[ChaosCluster]:
    with chaos_cluster(NODES) as cluster:
        yield cluster
