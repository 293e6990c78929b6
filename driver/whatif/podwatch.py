"""What the replay learns of its pods from one informer: when each was first
seen bound, and when each went away. A pod that goes without the replay
deleting it was evicted (a failed device's taint does that)."""

import queue
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from driver.kubeapi.apiserver import ApiServer
from driver.kubeapi.informer import Informer
from driver.kubeapi.resources import PODS, path_of
from driver.whatif.jobobjects import JOB_LABEL


@dataclass(frozen=True)
class PodEvent:
    wall: float
    """time.monotonic() when the watch saw it."""
    kind: Literal["bound", "gone"]
    job: str
    pod: str


class PodWatch:
    """Feeds `events` from an informer of the namespace's replay pods, reporting
    each binding once. After a list (the first, or one after the watch's
    version expired), a pod it knew that the list lacks went away in between."""

    def __init__(self, server: ApiServer, namespace: str) -> None:
        self.events: queue.Queue[PodEvent] = queue.Queue()
        self.bound: set[str] = set()
        self.present: dict[str, str] = {}
        """Pod -> its job, for every pod seen and not seen go."""
        self.informer: Informer[Mapping[str, Any]] = Informer(
            server,
            path_of(PODS, namespace=namespace),
            {"labelSelector": JOB_LABEL},
            lambda pod: pod,
            on_list=self._listed,
            on_event=lambda kind, pod: self._see(pod, deleted=kind == "DELETED"),
        )

    def start(self) -> None:
        self.informer.start()

    def close(self) -> None:
        self.informer.close()

    def _listed(self, pods: list[Mapping[str, Any]]) -> None:
        names = {pod["metadata"]["name"] for pod in pods}
        for name, job in list(self.present.items()):
            if name not in names:
                del self.present[name]
                self.events.put(PodEvent(time.monotonic(), "gone", job, name))
        for pod in pods:
            self._see(pod, deleted=False)

    def _see(self, pod: Mapping[str, Any], deleted: bool) -> None:
        meta = pod["metadata"]
        name, job = meta["name"], meta["labels"][JOB_LABEL]
        if deleted:
            self.present.pop(name, None)
            self.events.put(PodEvent(time.monotonic(), "gone", job, name))
            return
        self.present[name] = job
        if (pod.get("spec") or {}).get("nodeName") and name not in self.bound:
            self.bound.add(name)
            self.events.put(PodEvent(time.monotonic(), "bound", job, name))
