"""The on-disk state of a local cluster: which `serve` runs it, which
processes it started, and removing all of it again.

`serve` records every child's pid in cluster.json, so `down` can find a
process that somehow outlived a crashed `serve` (each child also gets a
parent-death signal). A pid is only acted on while its command line still
names the state directory, so a reused pid is never touched.
"""

import contextlib
import json
import os
import shutil
import signal
import stat
import time
from pathlib import Path
from typing import Any

from localsim.paths import STATE_ENTRIES, ClusterPaths

DEFAULT_STATE_DIR = Path.home() / ".local" / "state" / "trainium-dra" / "cluster"
STATE_DIR_ENV = "TRAINIUM_DRA_CLUSTER_DIR"


def default_state_dir() -> Path:
    return Path(os.environ.get(STATE_DIR_ENV) or DEFAULT_STATE_DIR)


def read_cluster(paths: ClusterPaths) -> dict[str, Any]:
    try:
        data: dict[str, Any] = json.loads(paths.cluster_file.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return {}
    return data


def write_cluster(paths: ClusterPaths, data: dict[str, Any]) -> None:
    tmp = paths.cluster_file.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1))
    tmp.replace(paths.cluster_file)


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def owned(pid: int, paths: ClusterPaths) -> bool:
    """The process lives and its command line names this state directory."""
    text = cmdline(pid) + " "
    return any(f"{paths.root}{end}" in text for end in "/ ")


def serve_pid(paths: ClusterPaths) -> int | None:
    """The pid of the live `serve` of this state directory, if any."""
    try:
        pid = int(paths.pid_file.read_text())
    except (FileNotFoundError, ValueError):
        return None
    return pid if owned(pid, paths) else None


def stray_pids(paths: ClusterPaths) -> list[int]:
    """Recorded children of this cluster that are still alive."""
    pids = read_cluster(paths).get("pids", {}).values()
    return [int(p) for p in pids if owned(int(p), paths)]


def terminate(pids: list[int], paths: ClusterPaths, timeout: float = 30.0) -> None:
    """SIGTERM, then SIGKILL whatever of this cluster is still alive after `timeout`."""
    for pid in pids:
        _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while any(owned(p, paths) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.2)
    for pid in pids:
        if owned(pid, paths):
            _signal(pid, signal.SIGKILL)
    while any(owned(p, paths) and not _zombie(p) for p in pids):
        time.sleep(0.05)


def _signal(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1].startswith("Z")
    except (OSError, IndexError):
        return True


class RuntimeDirError(RuntimeError):
    """The runtime directory's parent is not this user's own private directory."""


def make_state_dirs(paths: ClusterPaths) -> None:
    """The state directory, and the runtime directory with the state directory's
    `run` link to it. The runtime directory's parent sits in world-writable /tmp,
    so it is used only while it is a real directory of this user, mode 0700."""
    paths.root.mkdir(parents=True, exist_ok=True)
    parent = paths.runtime.parent
    with contextlib.suppress(FileExistsError):
        parent.mkdir(mode=0o700)
    info = os.lstat(parent)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        raise RuntimeDirError(
            f"runtime directory: {parent} must be a directory of uid {os.getuid()}, but it is "
            f"{'a directory' if stat.S_ISDIR(info.st_mode) else 'not a directory'} of uid "
            f"{info.st_uid}; remove it and start again"
        )
    os.chmod(parent, 0o700)
    paths.runtime.mkdir(mode=0o700, exist_ok=True)
    paths.runtime_link.unlink(missing_ok=True)
    paths.runtime_link.symlink_to(paths.runtime)


def remove_state(paths: ClusterPaths) -> None:
    """Remove what `serve` creates (nothing else), then the directory if empty."""
    shutil.rmtree(paths.runtime, ignore_errors=True)
    with contextlib.suppress(OSError):
        paths.runtime.parent.rmdir()  # only when no other cluster of this user uses it
    for name in STATE_ENTRIES:
        path = paths.root / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
    with contextlib.suppress(OSError):
        paths.root.rmdir()  # only when nothing else is in it
