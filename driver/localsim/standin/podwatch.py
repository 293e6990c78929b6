"""The pod list-and-watch loop of the kubelet stand-in, apart from what it feeds.

Each round lists every pod, hands the list over, then watches from the list's
resource version until the watch times out, breaks or the stop event is set
(which closes the watch at once); a broken round is logged and relisted after a second.
"""

import logging
import threading
import time
from collections.abc import Callable

from kubernetes import client, watch

from driver.jsontypes import JSON

log = logging.getLogger(__name__)
WATCH_SECONDS = 30


def watch_pods(
    api: client.ApiClient,
    stopping: threading.Event,
    on_list: Callable[[list[JSON]], None],
    on_event: Callable[[JSON, bool], None],
) -> None:
    """Until `stopping`: `on_list(pods)` after each list, `on_event(pod, deleted)` per change."""
    core = client.CoreV1Api(api)
    stream = watch.Watch()

    def close_on_stop() -> None:
        # Shut the open watch's socket: a watch left open holds up the
        # apiserver's own shutdown until it is killed.
        stopping.wait()
        stream.stop()

    threading.Thread(target=close_on_stop, name="pod-watch-close", daemon=True).start()

    def one_round() -> None:
        listed = api.sanitize_for_serialization(core.list_pod_for_all_namespaces())
        on_list(listed["items"])
        for event in stream.stream(
            core.list_pod_for_all_namespaces,
            resource_version=listed["metadata"]["resourceVersion"],
            timeout_seconds=WATCH_SECONDS,
        ):
            if stopping.is_set():
                stream.stop()
                return
            if event["type"] == "ERROR":
                return
            on_event(event["raw_object"], event["type"] == "DELETED")

    while not stopping.is_set():
        try:
            one_round()
        except Exception as err:  # the apiserver went away or the watch broke
            if not stopping.is_set():
                log.warning("pod watch: %s; relisting", err)
                time.sleep(1.0)
