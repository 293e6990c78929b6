"""The apiserver client against the real apiserver: threads share its
kept-alive connections, a burst keeps no more than the pool's bound, a write
on a kept connection the server has closed is sent again on a new one, and
failures say whether the apiserver answered."""

import socket
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
from kubernetes import client

from driver.kubeapi.apiserver import MAX_IDLE, ApiError, ApiServer, ApiUnreachableError
from localsim.controlplane.plane import ControlPlane

pytestmark = pytest.mark.integration

CONFIGMAPS = "/api/v1/namespaces/default/configmaps"


@pytest.fixture
def server(control_plane: ControlPlane) -> Iterator[ApiServer]:
    with control_plane.api_client() as api:
        yield ApiServer(api.configuration, "trainium-dra-test", 30.0)


def version_status(server: ApiServer) -> int:
    status, _, _ = server.exchange("GET", "/version", server.headers("application/json"))
    return status


def test_threads_one_after_another_share_one_connection(server: ApiServer) -> None:
    statuses: list[int] = []
    for _ in range(12):
        thread = threading.Thread(target=lambda: statuses.append(version_status(server)))
        thread.start()
        thread.join()
    assert statuses == [200] * 12
    assert server.idle() == 1


def test_a_burst_keeps_at_most_the_bound(server: ApiServer) -> None:
    barrier = threading.Barrier(4 * MAX_IDLE)

    def one(_: int) -> int:
        barrier.wait()
        page = server.call("GET", "/api/v1/namespaces", {"limit": "1"})
        return len(page["items"])

    with ThreadPoolExecutor(4 * MAX_IDLE) as pool:
        assert set(pool.map(one, range(4 * MAX_IDLE))) == {1}
    assert 1 <= server.idle() <= MAX_IDLE


def test_a_write_on_a_closed_kept_connection_is_sent_again(server: ApiServer) -> None:
    name = "apiserver-client-resend"
    body = {"metadata": {"name": name}, "data": {"k": "v"}}
    assert server.get_json(f"{CONFIGMAPS}/{name}") is None
    kept = server._idle[-1]  # the connection the next request takes
    assert kept.sock is not None
    kept.sock.shutdown(socket.SHUT_RDWR)
    try:
        created = server.call("POST", CONFIGMAPS, body=body)
        assert created["data"] == {"k": "v"}
    finally:
        server.call("DELETE", f"{CONFIGMAPS}/{name}")


def test_a_refusal_carries_the_apiserver_answer(server: ApiServer) -> None:
    with pytest.raises(ApiError) as refused:
        server.call("POST", CONFIGMAPS, body={"metadata": {}})
    assert refused.value.status == 422
    assert refused.value.reason == "Unprocessable Entity"
    assert "name or generateName is required" in refused.value.body


def test_no_apiserver_is_unreachable_not_a_refusal() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = client.Configuration(host=f"http://127.0.0.1:{port}")
    with pytest.raises(ApiUnreachableError, match="GET /version"):
        ApiServer(config, "trainium-dra-test", 5.0).call("GET", "/version")


def test_a_proxy_is_refused_naming_the_kubeconfig_field() -> None:
    config = client.Configuration(host="https://apiserver.example:6443")
    config.proxy = "http://proxy.example:3128"
    with pytest.raises(ValueError, match=r"proxy-url http://proxy\.example:3128"):
        ApiServer(config, "trainium-dra-test", 5.0)
