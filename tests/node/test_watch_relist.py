"""The watch-fed cache after the apiserver answers its watch with 410 Gone:
it lists again and then holds what is there now, including what was deleted
and created while its watch was away.

The watched resource is Events because the apiserver keeps no watch cache for
them: their watches go to etcd, which refuses a compacted revision, so one
etcd compaction makes the resumed watch's version gone. A cached resource's
watch is served from the apiserver's own cache, which kept answering an old
version after a compaction. The link between the cache and the apiserver is
cut in the client (no watch is sent while it is cut); the apiserver is real.
"""

import threading
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from kubernetes import client

from driver.kubeapi.apiserver import JSON_MEDIA, ApiError, ApiServer, Query, Stream
from driver.kubeapi.informer import WatchedObjects
from localsim.controlplane.plane import ControlPlane
from testbed.waiting import wait_for

pytestmark = pytest.mark.integration

NAMESPACE = "watch-relist"
EVENTS = f"/api/v1/namespaces/{NAMESPACE}/events"


class CuttableLink(ApiServer):
    """An apiserver client whose watches can be cut off: `cut` ends the open
    watch and holds the next one until `mend`. Counts lists (the cache's only
    other requests) and records each watch's starting resourceVersion."""

    def __init__(self, config: client.Configuration) -> None:
        super().__init__(config, "trainium-dra-test", 30.0)
        self.lists = 0
        self.watched_from: list[str] = []
        self.held = threading.Event()
        self._link = threading.Condition()
        self._up = True
        self._open: Stream | None = None

    def exchange(
        self, method: str, target: str, headers: Mapping[str, str], data: bytes | None = None
    ) -> tuple[int, str, bytes]:
        self.lists += 1
        return super().exchange(method, target, headers, data)

    def stream(self, path: str, query: Query, timeout: float, accept: str = JSON_MEDIA) -> Stream:
        with self._link:  # `cut` waits while a watch is being opened, then ends it
            while not self._up:
                self.held.set()
                self._link.wait()
            self.watched_from.append(query["resourceVersion"])
            self._open = super().stream(path, query, timeout, accept)
            return self._open

    def cut(self) -> None:
        with self._link:
            self._up = False
            if self._open is not None:
                self._open.interrupt()

    def mend(self) -> None:
        with self._link:
            self._up = True
            self._link.notify_all()


def message(event: Mapping[str, Any]) -> str:
    return str(event.get("message"))


def names(events: Mapping[str, str]) -> frozenset[str]:
    return frozenset(events)


def create_event(core: client.CoreV1Api, name: str) -> None:
    involved = {"kind": "Pod", "namespace": NAMESPACE, "name": "relist"}
    body = {"metadata": {"name": name}, "involvedObject": involved, "message": name}
    core.create_namespaced_event(NAMESPACE, body)


def answers_gone(config: client.Configuration, version: str) -> bool:
    """Whether a watch from `version` gets 410, as a status or as its first event."""
    server = ApiServer(config, "trainium-dra-test", 30.0)
    query = {"watch": "true", "resourceVersion": version, "timeoutSeconds": "5"}
    try:
        with server.stream(EVENTS, query, 30) as stream:
            event: Mapping[str, Any] = next(stream.events(), {})
    except ApiError as err:
        return err.status == 410
    return bool(event.get("type") == "ERROR" and (event.get("object") or {}).get("code") == 410)


@pytest.fixture
def core(control_plane: ControlPlane) -> Iterator[client.CoreV1Api]:
    if not control_plane.config.ports.etcd_client:
        pytest.skip("an attached control plane does not say where its etcd listens")
    with control_plane.api_client() as api:
        core = client.CoreV1Api(api)
        core.create_namespace({"metadata": {"name": NAMESPACE}})
        try:
            yield core
        finally:
            core.delete_namespace(NAMESPACE)


def test_a_gone_version_relists_to_what_is_there_now(
    core: client.CoreV1Api, control_plane: ControlPlane
) -> None:
    for name in ("stays", "goes"):
        create_event(core, name)
    link = CuttableLink(core.api_client.configuration)
    cache = WatchedObjects(link, EVENTS, {}, message, names)
    cache.start()
    try:
        assert cache.wait_synced(30)
        assert cache.view() == {"stays", "goes"}
        link.cut()
        assert link.held.wait(30), "the watch did not come back to be held"
        core.delete_namespaced_event("goes", NAMESPACE)
        create_event(core, "comes")
        revision = control_plane.compact_etcd()
        version = link.watched_from[-1]
        assert int(version) < revision
        assert answers_gone(core.api_client.configuration, version)
        link.mend()
        wait_for(
            "the cache to list again",
            lambda: cache.view() == {"stays", "comes"},
            timeout=30,
        )
        wait_for("the watch from the new list", lambda: len(link.watched_from) == 3)
        assert link.lists == 2
        assert link.watched_from[:2] == [version, version]
        assert int(link.watched_from[2]) >= revision
    finally:
        link.mend()
        cache.close()
