"""Every example under deploy/examples/ on real nodes: the real kubelet
prepares the claims through the node daemon's socket, containerd injects the
CDI edits, and each pod's container prints what it was given. The checks are
testbed/examples/'s, which the stand-in runs too, here against the package's one
real-node cluster (a Trn3 Gen1 UltraServer, 4 servers of 16 chips), with the
examples that assume the 36-server Gen2 rack fitted to it
(testbed/examples/rackscale.py)."""

import pytest

from testbed.examples.collectives import test_nccom_test_on_one_server_and_across_two
from testbed.examples.health import test_a_failed_core_evicts_only_the_partition_over_it
from testbed.examples.manifests import (
    test_admin_access,
    test_cel_topology,
    test_demo_job,
    test_device_taint_toleration,
    test_drain_chip,
    test_first_available,
    test_invalid_config,
    test_lnc2_partition,
    test_single_core,
    test_two_chips_same_server,
    test_whole_chip,
    test_whole_rack_shared_by_a_pod_per_server,
    test_whole_server,
)
from testbed.examples.scheduling import (
    test_a_server_binds_after_its_fabric_and_not_while_it_fails,
    test_extended_resource_requests_are_served_by_dra,
    test_four_server_gang_on_one_rack,
    test_quota_refuses_the_fifth_core,
    test_the_binpack_profile_puts_core_requests_on_the_fullest_node,
    test_whole_rack_gang_binds_all_or_nothing,
)
from testbed.examples.target import Target, rack_of
from testbed.realnodes import RealCluster

pytestmark = pytest.mark.integration

__all__ = [
    "test_a_failed_core_evicts_only_the_partition_over_it",
    "test_a_server_binds_after_its_fabric_and_not_while_it_fails",
    "test_admin_access",
    "test_cel_topology",
    "test_demo_job",
    "test_device_taint_toleration",
    "test_drain_chip",
    "test_extended_resource_requests_are_served_by_dra",
    "test_first_available",
    "test_four_server_gang_on_one_rack",
    "test_invalid_config",
    "test_lnc2_partition",
    "test_nccom_test_on_one_server_and_across_two",
    "test_quota_refuses_the_fifth_core",
    "test_single_core",
    "test_the_binpack_profile_puts_core_requests_on_the_fullest_node",
    "test_two_chips_same_server",
    "test_whole_chip",
    "test_whole_rack_gang_binds_all_or_nothing",
    "test_whole_rack_shared_by_a_pod_per_server",
    "test_whole_server",
]
"""The example checks collected here, against the `target` below."""


@pytest.fixture
def target(real: RealCluster) -> Target:
    """Real containers; each node's daemon pod serves its simulator controls."""
    return Target(real.cluster, rack_of(real.cluster), real.sim_control, True)
