"""One kubelet plugin: its DRA services on their socket, then its registration
socket, and their removal in the order the kubelet needs."""

import threading
from pathlib import Path
from typing import Protocol

import grpc

from driver.kubeletplugin import services, sockets
from driver.kubeletplugin.healthstream import HealthMonitor
from driver.kubeletplugin.interface import ClaimPreparer


class SocketPaths(Protocol):
    """Where the kubelet looks for a plugin's sockets."""

    @property
    def registry_dir(self) -> Path: ...

    @property
    def plugin_dir(self) -> Path: ...

    @property
    def registration_socket(self) -> Path: ...

    @property
    def registration_staging(self) -> Path: ...

    @property
    def dra_socket(self) -> Path: ...


class KubeletPlugin:
    def __init__(
        self,
        driver: str,
        paths: SocketPaths,
        preparer: ClaimPreparer,
        monitor: HealthMonitor,
        workers: int,
    ) -> None:
        self.driver = driver
        self.paths = paths
        self.preparer = preparer
        self.monitor = monitor
        self.workers = workers
        self.registration = services.RegistrationState()
        self._stopping = threading.Event()
        self._servers: list[grpc.Server] = []

    def start(self) -> None:
        """The DRA server first, then the registration socket, renamed into
        place only once the endpoint it names is serving."""
        paths = self.paths
        sockets.prepare_dirs(paths.plugin_dir, paths.registry_dir)
        handlers = services.dra_handlers(self.preparer, self.monitor, self._stopping)
        self._servers.append(sockets.serve(handlers, paths.dra_socket, self.workers))
        registration = services.registration_handler(
            self.driver, str(paths.dra_socket), self.registration
        )
        sockets.check_length(paths.registration_socket)
        self._servers.append(sockets.serve([registration], paths.registration_staging, 2))
        sockets.publish(paths.registration_staging, paths.registration_socket)

    def stop(self) -> None:
        """The registration socket first (the kubelet drops us), then the servers
        and the DRA socket."""
        self._stopping.set()
        sockets.remove(self.paths.registration_socket)
        for server in reversed(self._servers):
            server.stop(grace=1.0).wait()
        sockets.remove(self.paths.dra_socket)
        sockets.remove(self.paths.registration_staging)
