"""Crash-safe file writes: temp file, fsync, rename, fsync of the directory.

After a crash a reader sees either the old content or the new, never a torn file.
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


def write_atomic(path: Path, data: bytes, mode: int = 0o640) -> None:
    """Replace `path` with `data` atomically and durably, with permissions `mode`."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        os.fchmod(fd, mode)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise
    fsync_dir(path.parent)


def remove_durably(path: Path) -> bool:
    """Unlink `path` if present and make that durable; True if it existed."""
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    fsync_dir(path.parent)
    return True
