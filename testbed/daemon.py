"""The node daemon as a real subprocess (`python -m driver.cli node ...`)."""

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from driver.node.paths import NodePaths
from localsim.standin.kubelet import KubeletStandIn
from testbed.rack import SITE, Site
from testbed.waiting import Deadline

ROOT = Path(__file__).resolve().parents[1]


@contextmanager
def short_tmpdir() -> Iterator[Path]:
    """A scratch dir short enough for unix socket paths (107 bytes), removed afterwards."""
    path = Path(tempfile.mkdtemp(prefix="pt-", dir="/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


HEALTH_TIMEOUT = 3
"""Seconds; short, so the health stream's resends show within a test."""


class Daemon:
    def __init__(
        self,
        workdir: Path,
        kubeconfig: Path,
        *,
        failpoint: str = "",
        pod_uid: str = "",
        site: Site = SITE,
        placed_by_flags: bool = True,
        extra_args: tuple[str, ...] = (),
    ) -> None:
        self.workdir = workdir
        self.site = site
        self.placed_by_flags = placed_by_flags
        self.pod_uid = pod_uid
        self.kubeconfig = kubeconfig
        self.failpoint = failpoint
        self.proc: subprocess.Popen[str] | None = None
        self.http_port = 0
        self.sim_socket = workdir / "sim.sock"
        self.sim_control = ""  # where the daemon says its controls listen
        self.extra_args = extra_args
        self.stderr: list[str] = []

    def args(self) -> list[str]:
        if self.placed_by_flags:  # else the daemon finds them in the UltraServer objects
            nodes = [a for i, n in enumerate(self.site.nodes) for a in ("--node", f"{n}={i}")]
            nodes += ["--ultraserver", self.site.rack_id]
        else:
            nodes = [a for n in self.site.nodes for a in ("--node", n)]
        return [
            sys.executable,
            "-m",
            "driver.cli",
            "node",
            "--driver-name",
            self.site.driver,
            *nodes,
            "--kubelet-root",
            str(self.workdir / "{node}" / "kubelet"),
            "--state-dir",
            str(self.workdir / "{node}" / "state"),
            "--cdi-dir",
            str(self.workdir / "{node}" / "cdi"),
            "--kubeconfig",
            str(self.kubeconfig),
            "--http-address",
            "127.0.0.1:0",
            "--sim-control-address",
            f"unix:{self.sim_socket}",
            "--health-interval",
            "0.2",
            "--health-timeout",
            str(HEALTH_TIMEOUT),
            "--slice-cache-seconds",
            "5",
            "--pod-uid",
            self.pod_uid,
            "--workload-tcp",
            "127.0.0.1:0",
            *self.extra_args,
        ]

    def start(self, timeout: float = 60.0) -> "Daemon":
        env = {**os.environ, "TRAINIUM_DRA_FAILPOINT": self.failpoint, "POD_UID": ""}
        self.stderr = []
        self.proc = subprocess.Popen(
            self.args(), cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True
        )
        ready = threading.Event()
        proc = self.proc

        def read() -> None:
            assert proc.stderr is not None
            for line in proc.stderr:
                self.stderr.append(line)
                if line.startswith("ready http="):
                    fields = dict(f.split("=", 1) for f in line.split()[1:])
                    self.http_port = int(fields["http"])
                    self.sim_control = fields["sim-control"]
                    ready.set()

        threading.Thread(target=read, daemon=True).start()
        deadline = Deadline(timeout)
        while not ready.wait(0.1):
            if proc.poll() is not None or deadline.passed():
                code = self.stop()
                raise AssertionError(
                    f"daemon did not start (exit {code}):\n" + "".join(self.stderr[-40:])
                )
        return self

    def paths(self, node: str) -> NodePaths:
        base = self.workdir / node
        return NodePaths(
            base / "kubelet", self.site.driver, base / "state", base / "cdi", self.pod_uid
        )

    def kubelet(self, node: str) -> KubeletStandIn:
        kubelet = KubeletStandIn(self.workdir / node / "kubelet", self.site.driver)
        kubelet.register()
        return kubelet

    def http(self, method: str, path: str, json: object = None) -> httpx.Response:
        url = f"http://127.0.0.1:{self.http_port}{path}"
        return httpx.request(method, url, json=json, timeout=10.0)

    def sim(
        self, method: str, path: str, json: object = None, token: str | None = None
    ) -> httpx.Response:
        """A request to the simulator's controls (their own listener, not the metrics port)."""
        headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
        if self.sim_control.startswith("unix:"):
            transport = httpx.HTTPTransport(uds=self.sim_control.removeprefix("unix:"))
            with httpx.Client(transport=transport) as sim:
                return sim.request(method, f"http://sim{path}", json=json, headers=headers)
        host, _, port = self.sim_control.rpartition(":")
        host = "127.0.0.1" if host in ("0.0.0.0", "") else host
        url = f"http://{host}:{port}{path}"
        return httpx.request(method, url, json=json, headers=headers, timeout=10.0)

    def wait_dead(self, timeout: float = 30.0) -> int:
        assert self.proc is not None
        return self.proc.wait(timeout=timeout)

    def stop(self, sig: int = signal.SIGTERM) -> int:
        """Signal the daemon and wait; returns its exit code."""
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            code = self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.send_signal(signal.SIGUSR1)  # the daemon dumps its stacks to stderr
            time.sleep(1.0)
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(
                "daemon did not stop within 30s:\n" + "".join(self.stderr[-200:])
            ) from None
        self.proc = None
        return code
