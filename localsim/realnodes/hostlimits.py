"""Host limits that grow with the number of real nodes. Every kubelet,
containerd and kube-proxy opens inotify instances of its own (cAdvisor, file
watchers of certificates and configs), and the kernel's default of 128 per user
is spent well before a whole rack of 36 nodes is up: a kubelet then fails at
start with `inotify_init: too many open files`. The limits are raised before
the nodes start, never lowered, and left raised (they are ceilings, not
resources a cluster holds)."""

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Final

INOTIFY: Final = Path("/proc/sys/fs/inotify")
HOST_SHARE: Final = {"max_user_instances": 128, "max_user_watches": 65536}
"""What the rest of the host keeps: the kernel's default instances, and watches
for the editors and services a workstation runs."""
PER_NODE: Final = {"max_user_instances": 32, "max_user_watches": 16384}
"""A ceiling per real node: several times what its kubelet, containerd,
kube-proxy and pods open."""


def needed(nodes: int, current: Mapping[str, int]) -> dict[str, int]:
    """The limits to raise for `nodes` real nodes, and to what: only those now below."""
    want = {name: HOST_SHARE[name] + PER_NODE[name] * nodes for name in PER_NODE}
    return {name: value for name, value in want.items() if current[name] < value}


def raise_for(nodes: int, progress: Callable[[str], None], root: Path = INOTIFY) -> None:
    current = {name: int((root / name).read_text()) for name in PER_NODE}
    for name, value in needed(nodes, current).items():
        try:
            (root / name).write_text(f"{value}\n")
        except OSError as err:
            raise RuntimeError(
                f"fs.inotify.{name} is {current[name]}, below the {value} that {nodes} real "
                f"nodes need, and could not be raised ({err}); run as root or "
                f"`sysctl fs.inotify.{name}={value}` first"
            ) from err
        progress(f"  raised fs.inotify.{name} from {current[name]} to {value}")
