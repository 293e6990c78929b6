"""A local cluster run inside the calling process, so a chaos run can kill and
restart any part of it: etcd, the apiserver, the controller, a node daemon.

The parts are the ones `trainium-dra up` runs (localsim): the real
control plane, the controller, one node daemon per rack and the kubelet
stand-ins that run pods. A supervisor thread restarts a dead controller or
daemon as `up` does.
"""

import contextlib
import shutil
import signal
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from kubernetes import client

from driver.kubeapi.credentials import typed_client
from driver.node.durable.checkpoint import Checkpoint, ClaimRecord
from localsim.clusterspec import ClusterRack, ClusterSpec
from localsim.controlplane.children import Child
from localsim.controlplane.plane import ControlPlane
from localsim.paths import ClusterPaths
from localsim.serving import Progress
from localsim.standin.serve import StandInCluster
from localsim.state import remove_state
from testbed.localcluster import short_state_dir

SUPERVISE_INTERVAL = 0.5


class QuietProgress(Progress):
    """Start-up progress kept for the failure message instead of printed."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def __call__(self, message: str) -> None:
        self.lines.append(message)


@dataclass
class ChaosCluster:
    paths: ClusterPaths
    spec: ClusterSpec
    plane: ControlPlane
    local: StandInCluster
    api: client.ApiClient
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def rack(self) -> ClusterRack:
        return self.spec.racks[0]

    def daemon_url(self, rack: str = "rack-a") -> str:
        """Base URL of the rack's node daemon HTTP endpoint."""
        return f"http://127.0.0.1:{self.local.ports[rack]}"

    def sim_control(self, rack: str = "rack-a") -> Path:
        """The rack's daemon's simulator-control socket (fault injection)."""
        return self.paths.sim_control_socket(rack)

    def logs(self) -> list[Path]:
        """Every log of the driver's own processes (controller and daemons)."""
        return sorted(self.paths.logs.glob("*.log"))

    # --- faults ---------------------------------------------------------

    def component(self, name: str) -> Child:
        return next(c for c in self.plane.components if c.name == name)

    def kill_component(self, name: str) -> None:
        """SIGKILL a control-plane process (etcd, kube-apiserver, ...)."""
        child = self.component(name)
        child.process.send_signal(signal.SIGKILL)
        child.process.wait()
        child.log.close()

    def start_component(self, name: str) -> None:
        """Start a killed control-plane process again with its own command line."""
        old = self.component(name)
        new = Child.start(name, old.argv, old.log_path)
        self.plane.components[self.plane.components.index(old)] = new

    def kill_child(self, name: str) -> None:
        """SIGKILL the controller or a node daemon; the supervisor restarts it."""
        with self.lock:
            process = self.local.children[name].process
            process.send_signal(signal.SIGKILL)
            process.wait()

    def pid(self, name: str) -> int:
        return self.local.children[name].process.pid

    # --- node state -----------------------------------------------------

    def checkpoints(self) -> dict[str, dict[str, ClaimRecord]]:
        """Node name -> its daemon's checkpointed claims, for every node of every rack."""
        out: dict[str, dict[str, ClaimRecord]] = {}
        for rack in self.spec.racks:
            for node in rack.node_names():
                path = Path(self.paths.node_template("s").replace("{node}", node))
                out[node] = Checkpoint(path / "checkpoint.json").claims
        return out

    def supervise_forever(self, stop: threading.Event) -> None:
        progress = QuietProgress()
        while not stop.wait(SUPERVISE_INTERVAL):
            # Every round, as `up` does: supervise also renews the token of a re-created Node.
            with self.lock, contextlib.suppress(Exception):  # the next round tries again
                self.local.supervise(progress)


@contextlib.contextmanager
def chaos_cluster(nodes: int, generation: str = "trn3-gen2") -> Iterator[ChaosCluster]:
    """One rack of `nodes` nodes; everything stopped and removed on exit."""
    paths = ClusterPaths(short_state_dir())
    spec = ClusterSpec.build(racks=1, generation=generation, nodes_per_rack=nodes)
    progress = QuietProgress()
    with ControlPlane.running(paths.root, on_progress=progress) as plane:
        local = StandInCluster(paths, spec, plane)
        stop = threading.Event()
        supervisor: threading.Thread | None = None
        try:
            local.start(progress)
            api = typed_client(paths.kubeconfig, pool=32)
            cluster = ChaosCluster(paths, spec, plane, local, api)
            supervisor = threading.Thread(
                target=cluster.supervise_forever, args=(stop,), daemon=True
            )
            supervisor.start()
            yield cluster
            api.close()
        finally:
            stop.set()
            if supervisor is not None:
                supervisor.join(30)
            local.stop()
    remove_state(paths)  # the runtime directory too
    shutil.rmtree(paths.root, ignore_errors=True)
