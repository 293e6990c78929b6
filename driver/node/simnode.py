"""One simulated node: its server, its kubelet plugin, workload API and health loop.

Several `SimNode`s can live in one process (a whole rack), each with its own
kubelet root, state dir and sockets.
"""

import contextlib
import gc
import logging
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import uvicorn

from driver.devicemodel.placement import NodePlace
from driver.devicemodel.profiles import TRAINIUM, ConfigDialect
from driver.kubeletplugin import sockets
from driver.kubeletplugin.healthstream import HealthMonitor
from driver.kubeletplugin.plugin import KubeletPlugin
from driver.node.apireader import ClusterReader
from driver.node.durable.checkpoint import Checkpoint
from driver.node.durable.groupcommit import NodeState
from driver.node.health import Place, PlaceState, device_health
from driver.node.metrics import DriverMetrics
from driver.node.paths import NodePaths
from driver.node.prepare import Preparer, ensure_dirs
from driver.node.sim.simhost import SimHost
from driver.node.sim.telemetry import NodeInfo
from driver.node.sim.workloadapi import create_app
from simdevice.telemetry import ServerTelemetry

log = logging.getLogger(__name__)

HealthSink = Callable[[NodePlace, dict[Place, PlaceState]], None]
"""Receives a node's chip health whenever it changes (the controller's health path)."""


@dataclass(frozen=True)
class NodeOptions:
    grpc_workers: int = 4
    health_interval: float = 0.5
    health_timeout: int = 30
    workload_tcp: tuple[str, int] | None = None


def unix_listener(path: Path) -> socket.socket:
    """A listening unix socket at `path` with mode 0660 (bound before anyone can connect)."""
    sockets.check_length(path)
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(path))
    path.chmod(sockets.SOCKET_MODE)
    sock.listen(128)
    return sock


def tcp_listener(host: str, port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(128)
    return sock


class SimNode:
    def __init__(
        self,
        *,
        driver: str,
        place: NodePlace,
        paths: NodePaths,
        reader: ClusterReader,
        metrics: DriverMetrics,
        options: NodeOptions,
        health_sink: HealthSink | None = None,
        dialect: ConfigDialect = TRAINIUM.dialect,
        workload_tags: bool = False,
    ) -> None:
        self.driver = driver
        self.place = place
        self.paths = paths
        self.options = options
        self.health_sink = health_sink
        self.metrics = metrics
        ensure_dirs(paths)
        self.sim = SimHost(place.rack, place.server_index)
        self.state = NodeState(Checkpoint(paths.checkpoint))
        self.monitor = HealthMonitor(options.health_timeout)
        self.preparer = Preparer(
            driver=driver,
            dialect=dialect,
            workload_tags=workload_tags,
            place=place,
            paths=paths,
            reader=reader,
            state=self.state,
            metrics=metrics,
            release_claim=self._release,
        )
        self.plugin = KubeletPlugin(
            driver, paths, self.preparer, self.monitor, options.grpc_workers
        )
        metrics.set_prepared(place.node_name, len(self.state.checkpoint.claims))
        self.stopping = threading.Event()
        self._threads: list[threading.Thread] = []
        self._http: uvicorn.Server | None = None
        self._workload_inode: int | None = None
        self.workload_tcp_port: int | None = None
        self._reported: dict[Place, PlaceState] | None = None

    def _release(self, claim_uid: str) -> None:
        """On unprepare: the claim's jobs cancelled, its collective series dropped."""
        self.sim.release(claim_uid)
        self.metrics.forget_claim(self.name, claim_uid)

    @property
    def name(self) -> str:
        return self.place.node_name

    def info(self) -> NodeInfo:
        rack = self.place.rack
        return NodeInfo(
            self.name, self.place.ultraserver, rack.generation, rack.chip.name, rack.chip.cores
        )

    def telemetry(self) -> ServerTelemetry:
        return self.sim.telemetry()

    def start(self) -> None:
        """Claim files restored from the checkpoint, then the DRA socket, the
        registration socket, the workload API and health."""
        paths = self.paths
        rewritten, removed = self.preparer.restore()
        if rewritten or removed:
            log.info(
                "node %s: rewrote the files of claims %s, removed those of %s",
                self.name,
                rewritten,
                removed,
            )
        self.plugin.start()
        self._start_workload_api()
        self._spawn(self._health_loop, "health")
        self._spawn(self._reconcile, "reconcile")
        # What start-up allocated lives as long as the daemon: out of the
        # collector's way, so its pauses do not grow with it.
        gc.freeze()
        log.info("node %s serving on %s", self.name, paths.dra_socket)

    def _spawn(self, target: Callable[[], None], what: str) -> None:
        thread = threading.Thread(target=target, name=f"{self.name}-{what}", daemon=True)
        thread.start()
        self._threads.append(thread)

    def _start_workload_api(self) -> None:
        app = create_app(self.place, self.state, self.sim, self.metrics)
        listeners = [unix_listener(self.paths.workload_socket)]
        self._workload_inode = self.paths.workload_socket.stat().st_ino
        if self.options.workload_tcp:
            listeners.append(tcp_listener(*self.options.workload_tcp))
        config = uvicorn.Config(app, log_level="warning", lifespan="off")
        self._http = uvicorn.Server(config)
        http = self._http
        self._spawn(lambda: http.run(sockets=listeners), "workload-api")
        self.workload_tcp_port = listeners[-1].getsockname()[1] if len(listeners) > 1 else None
        if self.workload_tcp_port is not None:
            log.info("node %s: workload API on TCP port %d", self.name, self.workload_tcp_port)

    def describe(self) -> dict[str, object]:
        """What a client needs to reach this node (served at /sim/v1/nodes)."""
        return {
            "name": self.name,
            "ultraserver": self.place.ultraserver,
            "serverIndex": self.place.server_index,
            "registrationSocket": str(self.paths.registration_socket),
            "draSocket": str(self.paths.dra_socket),
            "workloadSocket": str(self.paths.workload_socket),
            "workloadTcpPort": self.workload_tcp_port,
            "registered": self.plugin.registration.registered,
            "preparedClaims": sorted(self.state.checkpoint.claims),
            "chips": {str(c): h.state for c, h in self.sim.chip_health().items()},
        }

    def _reconcile(self) -> None:
        try:
            gone = self.preparer.reconcile()
        except Exception:
            log.exception("node %s: checking checkpointed claims against the apiserver", self.name)
            return
        if gone:
            log.info("node %s: unprepared stale claims %s", self.name, gone)

    def check_health(self) -> bool:
        """Recompute health now; True when the devices' health changed.

        The sink is retried on the next check until it has accepted the change.
        """
        places = {
            place: PlaceState(h.state, h.reason) for place, h in self.sim.health_by_place().items()
        }
        devices = device_health(
            self.state.checkpoint.claims.values(), places, self.monitor.by_key(), time.time()
        )
        changed = self.monitor.update(devices)
        if self.health_sink is not None and places != self._reported:
            self.health_sink(self.place, places)
            self._reported = places
        return changed

    def _health_loop(self) -> None:
        """Check every interval and at once after a fault changes; a failure is
        logged once until its message changes."""
        last_error = ""
        while True:
            self.sim.faults_changed.wait(self.options.health_interval)
            self.sim.faults_changed.clear()
            if self.stopping.is_set():
                return
            try:
                self.check_health()
                last_error = ""
            except Exception as err:
                if str(err) != last_error:
                    log.exception("node %s: health check (retrying quietly)", self.name)
                last_error = str(err)

    def stop(self) -> None:
        """The kubelet plugin first (the kubelet drops us), then everything else."""
        self.stopping.set()
        self.sim.faults_changed.set()
        self.plugin.stop()
        if self._http is not None:
            self._http.should_exit = True
        for thread in self._threads:
            thread.join(timeout=5.0)
        # During a rolling update the new pod has bound the same path by now:
        # remove the socket only while it is still the one this process bound.
        sockets.remove_if_same(self.paths.workload_socket, self._workload_inode)
