"""The simulated UltraServer operator under real kubelets: two Trn3 Gen1 racks
of real nodes whose chart runs the operator's Deployment (profile aws); the
real kubelet prepares each claim through the node daemon's socket, so the
`workloadId` refusal, each strategy, a node's own daemon stopped, cascade
deletion and bad input are what a real node does (the checks are
testbed/examples/usoperator.py's, which the stand-in runs in full). The
cluster runs LeaderWorkerSet's manager too (`--with-lws`), and AWS's 4-node
inference LeaderWorkerSet (deploy/examples/aws-ultraserver/lws-4-node.yaml)
runs its two groups on the two racks' `ultraserver-server-id-4` quads (the
check is testbed/examples/lws.py's)."""

from collections.abc import Iterator

import pytest

from testbed.examples.lws import check_groups_hold_whole_nodes_of_their_own_set
from testbed.examples.target import Target, rack_of
from testbed.examples.usoperator import (
    OPERATOR_RACKS,
    test_a_claim_not_of_the_workload_is_refused_at_prepare,
    test_a_workload_gets_one_pair_and_its_pods_land_on_it,
    test_bad_workloads_are_refused_at_create_with_the_field,
    test_deleting_a_workload_releases_its_nodes_template_and_pods,
    test_migrate_affected_moves_only_the_pod_of_the_failed_node,
    test_migrate_affected_on_a_stopped_node_daemon,
    test_noop_reports_the_failure_and_moves_nothing,
    test_restart_all_starts_every_pod_anew_on_healthy_nodes,
)
from testbed.localcluster import running_cluster
from testbed.realnodes import real_cluster

pytestmark = pytest.mark.integration

START_TIMEOUT = 900.0
DAEMON_COMMAND = "trainium-dra node"
"""What a node daemon's command line holds (its container's args)."""

__all__ = [
    "test_a_claim_not_of_the_workload_is_refused_at_prepare",
    "test_a_workload_gets_one_pair_and_its_pods_land_on_it",
    "test_bad_workloads_are_refused_at_create_with_the_field",
    "test_deleting_a_workload_releases_its_nodes_template_and_pods",
    "test_migrate_affected_moves_only_the_pod_of_the_failed_node",
    "test_migrate_affected_on_a_stopped_node_daemon",
    "test_noop_reports_the_failure_and_moves_nothing",
    "test_restart_all_starts_every_pod_anew_on_healthy_nodes",
]


@pytest.fixture(scope="module")
def target() -> Iterator[Target]:
    with running_cluster(
        "--real-nodes", *OPERATOR_RACKS, "--with-lws", start_timeout=START_TIMEOUT
    ) as cluster:
        real = real_cluster(cluster)
        yield Target(
            cluster,
            rack_of(cluster),
            real.sim_control,
            True,
            lambda node: real.process_pids(node, DAEMON_COMMAND),
        )


def test_lws_4_node_groups_hold_whole_nodes_of_one_quad_each(target: Target) -> None:
    """Each rack's four nodes are one quad: one group on each."""
    check_groups_hold_whole_nodes_of_their_own_set(target, 4)
