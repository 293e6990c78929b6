"""Paged lists and watches: a list's items and the resourceVersion to watch
from, and a watch from that version that asks for bookmarks, so a resumed
watch starts from a version the apiserver still keeps."""

from collections.abc import Callable
from typing import Any, Final, TypeVar

from driver.kubeapi.apiserver import JSON_MEDIA, ApiServer, Query, Stream

T = TypeVar("T")

PAGE: Final = 500
WATCH_SECONDS: Final = 300
"""How long one watch request asks the apiserver to stay open."""
METADATA_LIST: Final = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
METADATA_ONLY: Final = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"


def list_items(
    server: ApiServer,
    path: str,
    query: Query,
    project: Callable[[Any], T],
    accept: str = JSON_MEDIA,
) -> tuple[list[T], str]:
    """Every page's items, each kept as `project(item)` (so a page is let go
    before the next arrives), and the list's resourceVersion."""
    items: list[T] = []
    token = ""
    while True:
        page_query = {**query, "limit": str(PAGE)} | ({"continue": token} if token else {})
        page = server.call("GET", path, page_query, accept=accept)
        items += [project(item) for item in page.get("items") or []]
        meta = page.get("metadata") or {}
        token = meta.get("continue") or ""
        if not token:
            return items, str(meta["resourceVersion"])


def watch(
    server: ApiServer, path: str, query: Query, version: str, accept: str = JSON_MEDIA
) -> Stream:
    """One watch request from `version`, which the apiserver ends after
    WATCH_SECONDS; a read waits a little longer than that before it gives up."""
    watch_query = {
        **query,
        "watch": "true",
        "resourceVersion": version,
        "allowWatchBookmarks": "true",
        "timeoutSeconds": str(WATCH_SECONDS),
    }
    return server.stream(path, watch_query, WATCH_SECONDS + 30, accept)
