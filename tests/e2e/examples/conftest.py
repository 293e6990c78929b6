"""One local cluster (a full Trn3 Gen2 rack, 36 nodes) for every example test
in this package: starting it is the slow part, and each test leaves it empty.
The example checks take it as a `target`; tests/realnodes/test_examples.py
runs the same checks on the real-node cluster."""

from collections.abc import Iterator

import pytest

from testbed.examples.target import Target, rack_of
from testbed.localcluster import Cluster, running_cluster


@pytest.fixture(scope="package")
def cluster() -> Iterator[Cluster]:
    with running_cluster() as running:
        yield running


@pytest.fixture
def target(cluster: Cluster) -> Target:
    """The stand-in: one rack daemon serves every node's simulator controls."""
    return Target(cluster, rack_of(cluster), lambda node: cluster.sim_control(), False)
