"""deploy/examples/aws-neuron/ on the stand-in, under the AWS profile: each of
AWS's documented claim shapes gets the allocation AWS describes, and the
container's environment carries the LNC and UltraServer mode as the Neuron
runtime reads them (the checks are testbed/examples/aws.py's), on one cluster
of two racks: standalone trn2.48xlarge instances and a Trn2 UltraServer."""

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
from testbed.examples.target import Target, rack_of
from testbed.localcluster import running_cluster

pytestmark = pytest.mark.integration

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
    # deploy/examples/aws-neuron/ needs no LeaderWorkerSet (test_lws.py runs it).
    with running_cluster(*AWS_RACKS, "--without-lws") as cluster:
        yield Target(cluster, rack_of(cluster), lambda node: cluster.sim_control(), False)


@pytest.fixture
def instances(aws: Target) -> Target:
    return aws


@pytest.fixture
def ultraserver(aws: Target) -> Target:
    return aws
