"""The daemon's GET client against the real apiserver: threads share its
kept-alive connections, and a burst keeps no more than the pool's bound."""

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from driver.localsim.controlplane import ControlPlane
from driver.plugin.apiget import MAX_IDLE, ApiGetter

pytestmark = pytest.mark.integration


def test_threads_one_after_another_share_one_connection(control_plane: ControlPlane) -> None:
    with control_plane.api_client() as api:
        getter = ApiGetter(api.configuration)
        statuses: list[int] = []
        for _ in range(12):
            thread = threading.Thread(target=lambda: statuses.append(getter.get("/version")[0]))
            thread.start()
            thread.join()
        assert statuses == [200] * 12
        assert getter.idle() == 1


def test_a_burst_keeps_at_most_the_bound(control_plane: ControlPlane) -> None:
    with control_plane.api_client() as api:
        getter = ApiGetter(api.configuration)
        barrier = threading.Barrier(4 * MAX_IDLE)

        def one(_: int) -> int:
            barrier.wait()
            return getter.get("/api/v1/namespaces", [("limit", "1")])[0]

        with ThreadPoolExecutor(4 * MAX_IDLE) as pool:
            assert set(pool.map(one, range(4 * MAX_IDLE))) == {200}
        assert 1 <= getter.idle() <= MAX_IDLE
