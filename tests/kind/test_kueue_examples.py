"""Every deploy/examples/kueue-* example on the kind cluster, with Kueue from
its own chart configured as `up --with-kueue` configures it (`make
kind-kueue`): the checks of testbed/examples/kueue.py, which the stand-in runs
too (tests/e2e/test_kueue.py), here against kind's real kubelets and one
Trn3 Gen1 rack of four nodes, the whole-rack examples fitted to it
(testbed/examples/rackscale.py). Run by hack/kind/e2e.sh, which names the
cluster's kubeconfig in TRAINIUM_DRA_KIND_KUBECONFIG; `make test-stand-in`
leaves this directory out."""

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from kubernetes import client

from driver.kubeapi.credentials import typed_client
from driver.localsim.clusterspec import ClusterPaths
from driver.localsim.controlplane.k8srelease import release_of
from simdevice.topology import rack_spec
from testbed.examples.kueue import (
    test_a_team_borrows_and_the_lender_reclaims,
    test_high_priority_rack_job_preempts_low_jobs,
    test_kueue_refuses_claims_it_cannot_count,
    test_rack_gang_is_admitted_whole_and_not_overtaken,
    test_team_quota_admits_jobs_up_to_its_cores,
)
from testbed.examples.target import Target
from testbed.localcluster import Cluster

pytestmark = pytest.mark.integration

__all__ = [
    "test_a_team_borrows_and_the_lender_reclaims",
    "test_high_priority_rack_job_preempts_low_jobs",
    "test_kueue_refuses_claims_it_cannot_count",
    "test_rack_gang_is_admitted_whole_and_not_overtaken",
    "test_team_quota_admits_jobs_up_to_its_cores",
]

KIND_RACK = rack_spec("trn3-gen1")
"""deploy/values/kind.yaml's UltraServer kind-rack, a node per server."""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    kubeconfig = os.environ.get("TRAINIUM_DRA_KIND_KUBECONFIG")
    if not kubeconfig:
        pytest.fail("TRAINIUM_DRA_KIND_KUBECONFIG unset: run by hack/kind/e2e.sh (make kind-e2e)")
    kubectl = shutil.which(os.environ.get("KUBECTL", "kubectl"))
    assert kubectl, "no kubectl on PATH (make kind-e2e puts kind's first)"
    paths = ClusterPaths(tmp_path_factory.mktemp("kind"))
    shutil.copy(kubeconfig, paths.kubeconfig)
    with typed_client(paths.kubeconfig) as api:
        version = client.VersionApi(api).get_code().git_version
        yield Cluster(paths, api, Path(kubectl), release_of(version))


@pytest.fixture
def target(cluster: Cluster) -> Target:
    """Real kubelets run the containers; the Kueue checks use no simulator controls."""

    def no_sim_control(node: str) -> httpx.Client:
        raise AssertionError(f"the Kueue checks reach no simulator controls ({node})")

    return Target(cluster, KIND_RACK, no_sim_control, True)
