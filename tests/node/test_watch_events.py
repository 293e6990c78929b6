"""How one watch event changes the objects a watch holds: pure folding, no
apiserver (test_watch_relist.py gets a real 410 from it)."""

from typing import Any

import pytest
from kubernetes import client

from driver.kubeapi.apiserver import ApiError, ApiServer
from driver.kubeapi.informer import VersionGoneError, WatchedObjects


def watched() -> WatchedObjects[int, dict[str, int]]:
    return WatchedObjects(
        ApiServer(client.Configuration(), "trainium-dra-test", 1.0),
        "/apis/x/v1/things",
        {},
        lambda o: o["n"],
        dict,
    )


def event(kind: str, name: str, version: str, n: int = 0) -> dict[str, Any]:
    meta = {"name": name, "resourceVersion": version}
    return {"type": kind, "object": {"metadata": meta, "n": n}}


def test_events_fold_in_and_leave_the_version_to_resume_from() -> None:
    things = watched()
    assert things._apply(event("ADDED", "a", "7", 1), "5") == "7"
    assert things._apply(event("MODIFIED", "a", "x9", 2), "7") == "x9"
    assert things._apply(event("BOOKMARK", "", "x10"), "x9") == "x10"
    assert things.view(timeout=0) == {"a": 2}
    assert things._apply(event("DELETED", "a", "x11"), "x10") == "x11"
    assert things.view(timeout=0) == {}


def test_a_gone_version_asks_for_a_list_and_other_errors_for_a_retry() -> None:
    gone = {"type": "ERROR", "object": {"kind": "Status", "code": 410, "message": "too old"}}
    with pytest.raises(VersionGoneError):
        watched()._apply(gone, "5")
    other = {"type": "ERROR", "object": {"kind": "Status", "code": 500, "message": "boom"}}
    with pytest.raises(ApiError, match="boom"):
        watched()._apply(other, "5")
