"""The cgroups of real nodes on a cgroup-v1 host: created below one parent in
every v1 hierarchy, measured for memory and CPU, and emptied on the way down
(pods and shims outlive their kubelet and containerd otherwise)."""

import contextlib
import os
import signal
import time
from pathlib import Path

CGROUP_MOUNT = Path("/sys/fs/cgroup")
SKIPPED = ("unified",)
"""The v2 hierarchy; the kubelet checks its cgroup root in every v1 one, systemd's named one too."""


class CgroupError(RuntimeError):
    """A cgroup could not be created or emptied; names the path."""


def hierarchies() -> list[Path]:
    """The mounted v1 hierarchies (cpu and cpuacct may be one, linked twice)."""
    found: dict[Path, Path] = {}
    for entry in sorted(CGROUP_MOUNT.iterdir()):
        if entry.name in SKIPPED or not (entry / "cgroup.procs").exists():
            continue
        found.setdefault(entry.resolve(), entry)
    if not found:
        raise CgroupError(
            f"no cgroup v1 hierarchy under {CGROUP_MOUNT}: real nodes need a cgroup-v1 host "
            "(kubelets run with failCgroupV1: false and the cgroupfs driver)"
        )
    return list(found.values())


def dirs(cgroup: str) -> list[Path]:
    return [h / cgroup.lstrip("/") for h in hierarchies()]


def create(cgroup: str) -> None:
    """Create `cgroup` and its parents; cpuset levels inherit cpus and mems."""
    for hierarchy in hierarchies():
        path = hierarchy
        for part in cgroup.strip("/").split("/"):
            parent, path = path, path / part
            if path.is_dir():
                continue
            path.mkdir()
            for name in ("cpuset.cpus", "cpuset.mems"):
                if (parent / name).exists():
                    (path / name).write_text((parent / name).read_text())


def pids(cgroup: str) -> list[int]:
    """Every process in `cgroup` or below, by the pids hierarchy (or the first)."""
    root = CGROUP_MOUNT / "pids" / cgroup.lstrip("/")
    if not (CGROUP_MOUNT / "pids").is_dir():
        root = dirs(cgroup)[0]
    found: set[int] = set()
    if not root.exists():
        return []
    for directory, _, _ in os.walk(root):
        try:
            text = Path(directory, "cgroup.procs").read_text()
        except FileNotFoundError:
            continue
        found.update(int(line) for line in text.split())
    return sorted(found)


def kill_all(cgroup: str, timeout: float = 30.0) -> None:
    """SIGKILL everything in `cgroup` until it stays empty, then remove it."""
    deadline = time.monotonic() + timeout
    while remaining := pids(cgroup):
        for pid in remaining:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if time.monotonic() > deadline:
            raise CgroupError(f"cgroup {cgroup} still has processes {remaining} after {timeout}s")
        time.sleep(0.1)
    remove(cgroup)


def remove(cgroup: str) -> None:
    """Remove `cgroup` and everything below it, deepest first (empty cgroups only)."""
    for root in dirs(cgroup):
        if not root.exists():
            continue
        for directory, _, _ in sorted(os.walk(root), key=lambda w: -len(w[0])):
            try:
                os.rmdir(directory)
            except FileNotFoundError:
                pass
            except OSError as err:
                raise CgroupError(f"cannot remove cgroup {directory}: {err}") from err


def memory_bytes(cgroup: str) -> int:
    """Resident memory of `cgroup` and below (rss + mapped files, no page cache)."""
    stat = CGROUP_MOUNT / "memory" / cgroup.lstrip("/") / "memory.stat"
    values = dict(line.split() for line in stat.read_text().splitlines())
    return int(values.get("total_rss", 0)) + int(values.get("total_mapped_file", 0))


def cpu_seconds(cgroup: str) -> float:
    usage = CGROUP_MOUNT / "cpuacct" / cgroup.lstrip("/") / "cpuacct.usage"
    return int(usage.read_text()) / 1e9
