"""The simulated UltraServer operator under real kubelets: two Trn3 Gen1 racks
of real nodes whose chart runs the operator's Deployment (profile aws); the
real kubelet prepares each claim through the node daemon's socket, so the
`workloadId` refusal and a migration are what a real node does (the checks
are testbed/examples/usoperator.py's, which the stand-in runs in full)."""

from collections.abc import Iterator

import pytest

from testbed.examples.target import Target, rack_of
from testbed.examples.usoperator import (
    OPERATOR_RACKS,
    test_a_claim_not_of_the_workload_is_refused_at_prepare,
    test_a_workload_gets_one_pair_and_its_pods_land_on_it,
    test_migrate_affected_moves_only_the_pod_of_the_failed_node,
)
from testbed.localcluster import running_cluster
from testbed.realnodes import real_cluster

pytestmark = pytest.mark.integration

START_TIMEOUT = 900.0

__all__ = [
    "test_a_claim_not_of_the_workload_is_refused_at_prepare",
    "test_a_workload_gets_one_pair_and_its_pods_land_on_it",
    "test_migrate_affected_moves_only_the_pod_of_the_failed_node",
]


@pytest.fixture(scope="module")
def target() -> Iterator[Target]:
    with running_cluster("--real-nodes", *OPERATOR_RACKS, start_timeout=START_TIMEOUT) as cluster:
        real = real_cluster(cluster)
        yield Target(cluster, rack_of(cluster), real.sim_control, True)
