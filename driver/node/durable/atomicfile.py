"""File writes by temp file and rename: a reader sees the old content or the new,
never a torn file.

`write_atomic` also makes the new content durable (fsync of the file and of
its directory) and is kept for the checkpoint, the one file whose loss could
not be repaired. `write_replace` skips both fsyncs: it is for files derived
from the checkpoint, which start-up rewrites if a power loss took them;
`write_if_changed` leaves such a file alone when it already holds the content.
"""

import contextlib
import os
from pathlib import Path


def fsync_dir(directory: Path) -> None:
    """Make a rename or unlink inside `directory` durable."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _replace(path: Path, data: bytes, mode: int, durable: bool) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        os.fchmod(fd, mode)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise


def write_atomic(path: Path, data: bytes, mode: int = 0o640) -> None:
    """Replace `path` with `data` atomically and durably, with permissions `mode`."""
    _replace(path, data, mode, durable=True)
    fsync_dir(path.parent)


def write_replace(path: Path, data: bytes, mode: int = 0o640) -> None:
    """Replace `path` with `data` atomically, without waiting for the disk."""
    _replace(path, data, mode, durable=False)


def write_if_changed(path: Path, data: bytes, mode: int = 0o640) -> bool:
    """`write_replace` unless `path` already holds `data`, so a file a container
    may have mounted keeps its inode; True if it was written."""
    try:
        if path.read_bytes() == data:
            return False
    except FileNotFoundError:
        pass
    write_replace(path, data, mode)
    return True


def remove(path: Path) -> bool:
    """Unlink `path` if present, without waiting for the disk; True if it existed."""
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    return True
