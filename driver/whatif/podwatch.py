"""What the replay learns of its pods from one watch: when each was first
seen bound, and when each went away. A pod that goes without the replay
deleting it was evicted (a failed device's taint does that)."""

import logging
import queue
import threading
import time
from dataclasses import dataclass
from typing import Any, Literal

from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from driver.whatif.objects import JOB_LABEL

log = logging.getLogger(__name__)
WATCH_SECONDS = 60


@dataclass(frozen=True)
class PodEvent:
    wall: float
    """time.monotonic() when the watch saw it."""
    kind: Literal["bound", "gone"]
    job: str
    pod: str


class PodWatch:
    """Feeds `events` from a watch of the namespace's replay pods, reporting
    each binding once. After the watch expires (410) it lists again, and a pod
    it knew that the list lacks went away in between."""

    def __init__(self, api: client.ApiClient, namespace: str) -> None:
        self.core = client.CoreV1Api(client.ApiClient(api.configuration))  # its own connections
        self.namespace = namespace
        self.events: queue.Queue[PodEvent] = queue.Queue()
        self.stop = threading.Event()
        self.bound: set[str] = set()
        self.present: dict[str, str] = {}
        """Pod -> its job, for every pod seen and not seen go."""
        self.thread = threading.Thread(target=self._run, name="whatif-pods", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def close(self) -> None:
        self.stop.set()

    def _see(self, pod: Any, deleted: bool) -> None:
        name, job = pod.metadata.name, pod.metadata.labels[JOB_LABEL]
        if deleted:
            self.present.pop(name, None)
            self.events.put(PodEvent(time.monotonic(), "gone", job, name))
            return
        self.present[name] = job
        if pod.spec.node_name and name not in self.bound:
            self.bound.add(name)
            self.events.put(PodEvent(time.monotonic(), "bound", job, name))

    def _run(self) -> None:
        version = None
        while not self.stop.is_set():
            try:
                if version is None:
                    listed = self.core.list_namespaced_pod(self.namespace, label_selector=JOB_LABEL)
                    names = {pod.metadata.name for pod in listed.items}
                    for name, job in list(self.present.items()):
                        if name not in names:
                            del self.present[name]
                            self.events.put(PodEvent(time.monotonic(), "gone", job, name))
                    for pod in listed.items:
                        self._see(pod, deleted=False)
                    version = listed.metadata.resource_version
                for event in watch.Watch().stream(
                    self.core.list_namespaced_pod,
                    self.namespace,
                    label_selector=JOB_LABEL,
                    resource_version=version,
                    timeout_seconds=WATCH_SECONDS,
                ):
                    version = event["object"].metadata.resource_version
                    self._see(event["object"], deleted=event["type"] == "DELETED")
                    if self.stop.is_set():
                        return
            except ApiException as err:
                if err.status != 410:
                    log.warning("pod watch: %s", err.reason)
                    time.sleep(1)
                version = None
