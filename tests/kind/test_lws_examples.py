"""AWS's UltraServer inference LeaderWorkerSets
(deploy/examples/aws-ultraserver/lws-2-node.yaml and lws-4-node.yaml) on the
kind cluster, applied as they are once `make kind-aws` switched the chart to
the AWS profile and `make kind-lws` installed LeaderWorkerSet from its own
chart: the checks of testbed/examples/lws.py, which the stand-in and the
real-node cluster run too, here on kind's real kubelets and its one Trn3
Gen1 UltraServer of four nodes (two `-2` pairs, one `-4` quad). The 2-node
file's two groups take a pair each; of the 4-node file's two groups one
takes the quad and the other stays unscheduled, kept off it by the
exclusive topology. Run by hack/kind/e2e.sh after the Kueue examples (the
cluster: conftest.py)."""

import pytest

from testbed.examples.lws import DRIVER, check_groups_hold_whole_nodes_of_their_own_set
from testbed.examples.target import Target

pytestmark = pytest.mark.integration


@pytest.fixture
def aws(target: Target) -> Target:
    assert target.cluster.driver == DRIVER, "the chart runs another profile: make kind-aws first"
    return target


def test_two_groups_of_two_take_the_two_pairs(aws: Target) -> None:
    check_groups_hold_whole_nodes_of_their_own_set(aws, 2)


def test_one_group_of_four_takes_the_quad_and_the_other_waits(aws: Target) -> None:
    check_groups_hold_whole_nodes_of_their_own_set(aws, 4, room=1)
