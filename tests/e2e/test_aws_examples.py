"""deploy/examples/aws-neuron/ on the stand-in, under the AWS profile: each of
AWS's documented claim shapes gets the allocation AWS describes, and the
container's environment carries the LNC and UltraServer mode as the Neuron
runtime reads them (the checks are testbed/examples/aws.py's). Standalone
trn2.48xlarge nodes for most; a Trn2 UltraServer (4 trn2u.48xlarge nodes) for
its modes."""

from collections.abc import Iterator

import pytest

from testbed.examples.aws import (
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
from testbed.localcluster import Cluster, running_cluster

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


def stand_in(cluster: Cluster) -> Target:
    return Target(cluster, rack_of(cluster), lambda node: cluster.sim_control(), False)


@pytest.fixture(scope="module")
def instances() -> Iterator[Target]:
    with running_cluster(
        "--profile=aws", "--instance-type=trn2.48xlarge", "--nodes-per-rack=2"
    ) as cluster:
        yield stand_in(cluster)


@pytest.fixture(scope="module")
def ultraserver() -> Iterator[Target]:
    with running_cluster("--profile=aws", "--generation=trn2") as cluster:
        yield stand_in(cluster)
