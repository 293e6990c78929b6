"""deploy/examples/aws-neuron/ under real kubelets: eight real nodes in two racks
(standalone trn2.48xlarge instances and a Trn2 UltraServer) whose chart runs
the AWS profile; the real kubelet prepares each claim through the node
daemon's socket, containerd injects the CDI edits, and each container prints
what it was given, LNC and UltraServer mode included (the checks are
testbed/examples/aws.py's, which the stand-in runs too). The cluster runs
LeaderWorkerSet's manager too (`--with-lws`), and AWS's 2-node inference
LeaderWorkerSet (deploy/examples/aws-ultraserver/lws-2-node.yaml) runs its two
groups on the UltraServer's two `ultraserver-server-id-2` pairs (the check is
testbed/examples/lws.py's, which the stand-in runs on Trn3 Gen1 racks)."""

from collections.abc import Iterator

import pytest

from testbed.examples.aws import (
    AWS_RACKS,
    test_a_deployment_on_one_driver_version,
    test_all_devices_takes_every_chip_of_one_node,
    test_bad_aws_configs_are_refused_at_create_with_the_field,
    test_connected_1x4,
    test_connected_1x8,
    test_four_chips_and_their_efas_share_a_group,
    test_lnc_setting_reaches_the_container,
    test_ultraserver_modes_give_each_pod_its_whole_node,
)
from testbed.examples.lws import check_groups_hold_whole_nodes_of_their_own_set
from testbed.examples.target import Target, rack_of
from testbed.localcluster import running_cluster
from testbed.realnodes import real_cluster

pytestmark = pytest.mark.integration

START_TIMEOUT = 900.0

__all__ = [
    "test_a_deployment_on_one_driver_version",
    "test_all_devices_takes_every_chip_of_one_node",
    "test_bad_aws_configs_are_refused_at_create_with_the_field",
    "test_connected_1x4",
    "test_connected_1x8",
    "test_four_chips_and_their_efas_share_a_group",
    "test_lnc_setting_reaches_the_container",
    "test_ultraserver_modes_give_each_pod_its_whole_node",
]


@pytest.fixture(scope="module")
def aws() -> Iterator[Target]:
    with running_cluster(
        "--real-nodes", *AWS_RACKS, "--with-lws", start_timeout=START_TIMEOUT
    ) as cluster:
        real = real_cluster(cluster)
        yield Target(cluster, rack_of(cluster), real.sim_control, True)


@pytest.fixture
def instances(aws: Target) -> Target:
    return aws


@pytest.fixture
def ultraserver(aws: Target) -> Target:
    return aws


def test_lws_2_node_groups_hold_whole_nodes_of_one_pair_each(ultraserver: Target) -> None:
    """The UltraServer's four nodes are two pairs: one group on each."""
    check_groups_hold_whole_nodes_of_their_own_set(ultraserver, 2)
