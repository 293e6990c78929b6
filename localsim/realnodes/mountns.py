"""Per real node, a mount namespace in which the node's directories sit at
the standard paths (/var/lib/kubelet, /var/run/cdi, ...), so the kubelet,
containerd and the chart's hostPath volumes all see the node's own files,
as they would inside a kind node container.

The namespace is kept alive by a bind mount of its /proc file, under a
directory that is itself a private mount (the same trick `ip netns` uses).
"""

import subprocess
from pathlib import Path

from localsim.realnodes.plan import RealNode


class MountError(RuntimeError):
    """A mount step failed; names the command."""


def run(argv: list[str]) -> None:
    result = subprocess.run(argv, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise MountError(
            f"`{' '.join(argv)}` failed: {result.stderr.strip()} (real nodes need root)"
        )


def is_mountpoint(path: Path) -> bool:
    return subprocess.run(["mountpoint", "-q", str(path)], check=False).returncode == 0


def create(node: RealNode) -> None:
    ns_dir = node.mount_ns.parent
    ns_dir.mkdir(parents=True, exist_ok=True)
    if not is_mountpoint(ns_dir):
        run(["mount", "--bind", str(ns_dir), str(ns_dir)])
        run(["mount", "--make-private", str(ns_dir)])
    node.mount_ns.touch()
    run(["unshare", f"--mount={node.mount_ns}", "--propagation", "private", "true"])
    for source, target in node.bind_mounts():
        if not source.is_file():
            source.mkdir(parents=True, exist_ok=True)
            Path(target).mkdir(parents=True, exist_ok=True)
        run(["nsenter", f"--mount={node.mount_ns}", "mount", "--bind", str(source), target])


def remove_all(nodes_dir: Path) -> list[str]:
    """Release every node's mount namespace and the private directory."""
    ns_dir = nodes_dir / ".ns"
    removed: list[str] = []
    if not ns_dir.exists():
        return removed
    for entry in sorted(ns_dir.iterdir()):
        if is_mountpoint(entry):
            subprocess.run(["umount", "--lazy", str(entry)], capture_output=True, check=False)
            removed.append(f"mount namespace {entry.name}")
        entry.unlink(missing_ok=True)
    if is_mountpoint(ns_dir):
        subprocess.run(["umount", "--lazy", str(ns_dir)], capture_output=True, check=False)
    ns_dir.rmdir()
    return removed
