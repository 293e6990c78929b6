"""The simulated Neuron UltraServer operator on the stand-in (the checks are
testbed/examples/usoperator.py's): two Trn3 Gen1 UltraServers of the AWS
profile, the operator started beside the controller."""

from collections.abc import Iterator

import pytest

from testbed.examples.target import Target, rack_of
from testbed.examples.usoperator import (
    OPERATOR_CLUSTER,
    standin_daemon_pids,
    test_a_claim_not_of_the_workload_is_refused_at_prepare,
    test_a_workload_gets_one_pair_and_its_pods_land_on_it,
    test_a_workload_no_cluster_can_hold_fails_and_holds_nothing,
    test_bad_workloads_are_refused_at_create_with_the_field,
    test_deleting_a_workload_releases_its_nodes_template_and_pods,
    test_migrate_affected_moves_only_the_pod_of_the_failed_node,
    test_migrate_affected_on_a_not_ready_node,
    test_migrate_affected_on_a_stopped_node_daemon,
    test_noop_reports_a_link_down_and_keeps_every_pod_running,
    test_noop_reports_the_failure_and_moves_nothing,
    test_restart_all_on_a_not_ready_node,
    test_restart_all_on_a_stopped_node_daemon,
    test_restart_all_starts_every_pod_anew_on_healthy_nodes,
    test_two_ultraservers_each_pod_with_its_nodes_efas,
)
from testbed.localcluster import running_cluster

pytestmark = pytest.mark.integration

__all__ = [
    "test_a_claim_not_of_the_workload_is_refused_at_prepare",
    "test_a_workload_gets_one_pair_and_its_pods_land_on_it",
    "test_a_workload_no_cluster_can_hold_fails_and_holds_nothing",
    "test_bad_workloads_are_refused_at_create_with_the_field",
    "test_deleting_a_workload_releases_its_nodes_template_and_pods",
    "test_migrate_affected_moves_only_the_pod_of_the_failed_node",
    "test_migrate_affected_on_a_not_ready_node",
    "test_migrate_affected_on_a_stopped_node_daemon",
    "test_noop_reports_a_link_down_and_keeps_every_pod_running",
    "test_noop_reports_the_failure_and_moves_nothing",
    "test_restart_all_on_a_not_ready_node",
    "test_restart_all_on_a_stopped_node_daemon",
    "test_restart_all_starts_every_pod_anew_on_healthy_nodes",
    "test_two_ultraservers_each_pod_with_its_nodes_efas",
]


@pytest.fixture(scope="module")
def target() -> Iterator[Target]:
    with running_cluster(*OPERATOR_CLUSTER) as cluster:
        yield Target(
            cluster,
            rack_of(cluster),
            lambda node: cluster.sim_control(node.rsplit("-node-", 1)[0]),
            False,
            standin_daemon_pids(cluster),
        )
