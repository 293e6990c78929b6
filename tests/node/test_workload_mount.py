"""A container keeps its workload API across a daemon restart.

A restarted daemon binds a new socket inode at the same path. Containers
mount what the claim's CDI spec says when they start; the spec must mount
the socket's directory, since a bind mount of the socket file itself keeps
pointing at the dead inode. Checked with a real bind mount, made as the
container runtime does, in a private mount namespace (root only).
"""

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from driver.node import cdi
from driver.node.paths import NodePaths
from testbed.daemon import short_tmpdir

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="bind mounts need root")

CONNECT = """
import socket, sys
s = socket.socket(socket.AF_UNIX)
try:
    s.connect(sys.argv[1])
except OSError as err:
    print("refused", err)
else:
    print("connected")
"""


def listen(path: Path) -> socket.socket:
    path.unlink(missing_ok=True)
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(path))
    sock.listen(1)
    return sock


def test_a_container_reaches_the_socket_a_restarted_daemon_binds() -> None:
    with short_tmpdir() as tmp_path:
        check_reached_after_rebind(tmp_path)


def check_reached_after_rebind(tmp_path: Path) -> None:
    paths = NodePaths(tmp_path / "k", "trainium.sim.dev", tmp_path / "s", tmp_path / "cdi")
    paths.workload_dir.mkdir(parents=True)
    edits = cdi.ClaimEdits(
        claim_uid="uid-1",
        visible_cores=[0],
        lnc=1,
        workload_socket=paths.workload_socket,
        token_file=tmp_path / "token",
        node_name="node-0",
        ultraserver="rack-a",
        server_index=0,
        generation="trn3-gen2",
        ring=[0],
        fabric_ips=[],
    )
    spec = cdi.claim_spec("trainium.sim.dev", edits)
    socket_in = Path(cdi.CONTAINER_WORKLOAD_SOCKET)
    [mount] = [
        m
        for m in spec["devices"][0]["containerEdits"]["mounts"]
        if Path(m["containerPath"]) in (socket_in, *socket_in.parents)
    ]
    root = tmp_path / "c"
    target = root / mount["containerPath"].lstrip("/")
    inside = root / cdi.CONTAINER_WORKLOAD_SOCKET.lstrip("/")
    first = listen(paths.workload_socket)
    if Path(mount["hostPath"]).is_dir():
        target.mkdir(parents=True)
    else:  # a file mount needs a file to mount over
        target.parent.mkdir(parents=True)
        target.touch()
    first = listen(paths.workload_socket)
    # The "container": a mount namespace that bind-mounts as the spec says,
    # then connects each time it reads a line, until stdin closes.
    read_only = ",ro" if "ro" in mount["options"] else ""
    script = (
        f"mount --bind {mount['hostPath']} {target} && "
        f"mount -o remount,bind{read_only} {target} && "
        f'while read _; do {sys.executable} -c "$1" {inside}; done'
    )
    container = subprocess.Popen(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh", CONNECT],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert container.stdin and container.stdout
    try:
        container.stdin.write("\n")
        container.stdin.flush()
        assert container.stdout.readline().strip() == "connected"
        first.close()  # the daemon is SIGKILLed; its successor binds a new socket
        second = listen(paths.workload_socket)
        container.stdin.write("\n")
        container.stdin.flush()
        assert container.stdout.readline().strip() == "connected"
        second.close()
    finally:
        container.stdin.close()
        container.wait(10)
