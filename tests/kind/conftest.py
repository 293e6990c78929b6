"""The kind cluster `make kind-e2e` runs (hack/kind/e2e.sh names its
kubeconfig in TRAINIUM_DRA_KIND_KUBECONFIG and its container engine in
KIND_PROVIDER) as the example checks' `Target`: one Trn3 Gen1 rack of four
nodes, real kubelets that run the containers, and no simulator controls."""

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from kubernetes import client

from driver.kubeapi.credentials import typed_client
from localsim.controlplane.k8srelease import release_of
from localsim.paths import ClusterPaths
from simdevice.topology import rack_spec
from testbed.examples.target import Target
from testbed.kindcluster import KindCluster

KIND_RACK = rack_spec("trn3-gen1")
"""deploy/values/kind.yaml's UltraServer kind-rack, a node per server."""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KindCluster]:
    kubeconfig = os.environ.get("TRAINIUM_DRA_KIND_KUBECONFIG")
    engine = os.environ.get("KIND_PROVIDER")
    if not kubeconfig or not engine:
        pytest.fail(
            "TRAINIUM_DRA_KIND_KUBECONFIG or KIND_PROVIDER unset: run by hack/kind/e2e.sh "
            "(make kind-e2e)"
        )
    kubectl = shutil.which(os.environ.get("KUBECTL", "kubectl"))
    assert kubectl, "no kubectl on PATH (make kind-e2e puts kind's first)"
    paths = ClusterPaths(tmp_path_factory.mktemp("kind"))
    shutil.copy(kubeconfig, paths.kubeconfig)
    with typed_client(paths.kubeconfig) as api:
        version = client.VersionApi(api).get_code().git_version
        yield KindCluster(paths, api, Path(kubectl), release_of(version), engine)


@pytest.fixture
def target(cluster: KindCluster) -> Target:
    """Real kubelets run the containers; the kind checks use no simulator controls."""

    def no_sim_control(node: str) -> httpx.Client:
        raise AssertionError(f"the kind checks reach no simulator controls ({node})")

    return Target(cluster, KIND_RACK, no_sim_control, True)
