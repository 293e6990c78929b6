"""deploy/examples/aws-ultraserver/ on a cluster of the AWS profile, which runs
LeaderWorkerSet's manager unless told `--without-lws`:
AWS's UltraServer inference groups as LeaderWorkerSets, applied one after the
other to two Trn3 Gen1 racks under the AWS profile (the checks are
testbed/examples/lws.py's, which real kubelets run too)."""

from collections.abc import Iterator

import pytest

from testbed.examples.lws import check_groups_hold_whole_nodes_of_their_own_set
from testbed.examples.target import Target, rack_of
from testbed.localcluster import running_cluster

pytestmark = pytest.mark.integration

CLUSTER = ("--profile=aws", "--racks=2", "--generation=trn3-gen1")
"""8 trn3.48xlarge nodes: four `-2` pairs and two `-4` quads (the README's
cluster); the AWS profile runs LeaderWorkerSet by default."""


@pytest.fixture(scope="module")
def target() -> Iterator[Target]:
    with running_cluster(*CLUSTER) as cluster:
        yield Target(
            cluster,
            rack_of(cluster),
            lambda node: cluster.sim_control(node.rsplit("-node-", 1)[0]),
            False,
        )


@pytest.mark.parametrize("size", [2, 4])
def test_each_group_holds_whole_nodes_of_its_own_ultraserver_set(target: Target, size: int) -> None:
    check_groups_hold_whole_nodes_of_their_own_set(target, size)
