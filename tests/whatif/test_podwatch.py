"""The replay's pod watch on a real apiserver wakes a settle waiting on the
namespace when a pod changes, and only then, instead of a fixed poll."""

import time
from collections.abc import Iterator

import pytest
from kubernetes import client

from driver.kubeapi.apiserver import ApiServer
from localsim.controlplane.plane import ControlPlane
from testbed.waiting import wait_for
from whatif.jobobjects import JOB_LABEL
from whatif.podwatch import PodWatch

pytestmark = pytest.mark.integration

NAMESPACE = "whatif-podwatch"


@pytest.fixture
def api(control_plane: ControlPlane) -> Iterator[client.ApiClient]:
    with control_plane.api_client() as api:
        core = client.CoreV1Api(api)
        core.create_namespace({"metadata": {"name": NAMESPACE}})
        try:
            yield api
        finally:
            core.delete_namespace(NAMESPACE)


def test_a_wait_on_the_namespace_ends_at_the_next_pod_event(api: client.ApiClient) -> None:
    watch = PodWatch(ApiServer(api.configuration, "trainium-dra-test", 30.0), NAMESPACE)
    watch.start()
    try:

        def quiet() -> bool:
            """The watches have listed: a mark is followed by no change."""
            watch.mark()
            return not watch.wait_change(0.3)

        wait_for("the watches' first lists, then no change", quiet, 30, 0.0)
        pod = {
            "metadata": {"name": "job-a-0", "labels": {JOB_LABEL: "job-a"}},
            "spec": {"containers": [{"name": "c", "image": "none"}]},
        }
        client.CoreV1Api(api).create_namespaced_pod(NAMESPACE, pod)
        began = time.monotonic()
        assert watch.wait_change(30.0)
        assert time.monotonic() - began < 10.0
        assert watch.view(["job-a-0"], []).missing == 0
    finally:
        watch.close()
