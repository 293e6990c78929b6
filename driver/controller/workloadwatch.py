"""The informer of AWS's UltraServer operator's NeuronUltraServers (AWS
profile): keeps `Stores.workloads` current and tells the controller which
nodes' workloadId may have moved (workloadtags.py computes the tags).

Not a kopf handler: kopf looks for resources once, when it starts (the
controller turns its scanning off), and its whole operator stops when the
CRD of a resource it watches is deleted. The operator is optional and may be
installed or removed while the controller runs, so its resource is watched
here with the project's informer, whose loop takes a 404 for "not
installed": no objects, no tags, said once at info, listed again every few
seconds until it is served.
"""

import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any, Final

from driver.controller.stores import Store
from driver.controller.workloadtags import (
    NEURON_ULTRASERVERS,
    Allocations,
    node_workloads,
    nodes_named,
)
from driver.kubeapi.apiserver import ApiError, ApiServer
from driver.kubeapi.informer import (
    ABSENT_RETRY_SECONDS,
    FAILURES,
    RETRY_SECONDS,
    Informer,
    ResourceAbsentError,
    VersionGoneError,
)
from driver.kubeapi.resources import path_of

log = logging.getLogger(__name__)

RESOURCE: Final = f"{NEURON_ULTRASERVERS.plural}.{NEURON_ULTRASERVERS.group}"
UNAVAILABLE: Final = (403, 404)
"""Not served (the operator is not installed) or not readable (a role without
the rule the chart grants with profile aws): both mean no objects."""


class WorkloadWatch(Informer[Mapping[str, Any]]):
    """`on_nodes(nodes)` is called with the nodes named before or after each
    change of a NeuronUltraServer's allocations (and after each list)."""

    def __init__(
        self,
        server: ApiServer,
        store: Store[Allocations],
        on_nodes: Callable[[set[str]], None],
    ) -> None:
        super().__init__(
            server,
            path_of(NEURON_ULTRASERVERS),
            {},
            lambda obj: obj,
            on_list=self._listed,
            on_event=self._changed,
        )
        self.store = store
        self.on_nodes = on_nodes
        self.available: bool | None = None
        """Whether the last list or watch found the resource; None before the first."""
        self._problems: frozenset[str] = frozenset()

    def prime(self) -> None:
        """List once now (before the workers start); the watch goes on from it."""
        try:
            self.relist()
            self._available(True)
        except ApiError as err:
            if status_of(err) not in UNAVAILABLE:
                raise
            self._unavailable(err)

    def run(self, stop: threading.Event | None = None) -> None:
        """Watch from the last list until `stop`, listing again when the watch
        cannot resume; while the resource is unavailable, list every
        ABSENT_RETRY_SECONDS. Other failures are logged once and retried."""
        last_error = ""
        while not self._stopped(stop):
            try:
                if not self.version:
                    self.relist()
                    self._available(True)
                self.version = self._watch(stop)
                last_error = ""
            except VersionGoneError:
                self.version = ""
            except ApiError as err:
                if status_of(err) not in UNAVAILABLE:
                    last_error = self._failed(err, last_error, stop)
                    continue
                self._unavailable(err)
                self._stopping.wait(ABSENT_RETRY_SECONDS)
            except FAILURES as err:
                last_error = self._failed(err, last_error, stop)

    def _failed(self, err: Exception, last_error: str, stop: threading.Event | None) -> str:
        if not self._stopped(stop) and str(err) != last_error:
            log.warning("watching %s: %s; retrying", RESOURCE, err)
        self._stopping.wait(RETRY_SECONDS)
        return str(err)

    def _unavailable(self, err: ApiError) -> None:
        """No objects (a watch that lost its resource forgets them too); the
        next attempt lists."""
        self.version = ""
        self._listed([])
        if self.available is not False:
            if status_of(err) == 404:
                log.info(
                    "%s is not served (AWS's UltraServer operator is not installed): devices "
                    "carry no workloadId; looking again every %.0fs",
                    RESOURCE,
                    ABSENT_RETRY_SECONDS,
                )
            else:
                log.warning(
                    "%s: %s (the chart's controller role allows listing it with profile aws): "
                    "devices carry no workloadId",
                    RESOURCE,
                    err.reason or err,
                )
        self.available = False

    def _available(self, found: bool) -> None:
        if found and self.available is False:
            log.info("%s is served now: devices carry the workloadId of their node", RESOURCE)
        self.available = found

    def _listed(self, items: list[Mapping[str, Any]]) -> None:
        before = self.store.items()
        changed = self.store.relist(lambda: items)
        after = self.store.items()
        moved = nodes_named([before.get(k) for k in changed] + [after.get(k) for k in changed])
        self._report(moved)

    def _changed(self, kind: str, obj: Mapping[str, Any]) -> None:
        old, new = self.store.apply(kind, obj)
        if old != new:
            self._report(nodes_named([old, new]))

    def _report(self, moved: set[str]) -> None:
        """Tell the controller which nodes moved; warn once of each allocation
        whose nodes get no tag."""
        problems = frozenset(node_workloads(self.store.items()).problems)
        for problem in sorted(problems - self._problems):
            log.warning("%s", problem)
        self._problems = problems
        if moved:
            self.on_nodes(moved)


def status_of(err: ApiError) -> int:
    """The HTTP status of a failed list or watch (the informer's own error for a
    resource not served carries none)."""
    return 404 if isinstance(err, ResourceAbsentError) else err.status
