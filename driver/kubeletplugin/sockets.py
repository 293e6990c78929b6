"""Kubelet plugin sockets: private permissions, registration last, clean removal.

Both sockets are bound with mode 0660 — the DRA socket in the driver's own
plugin directory (0750), the registration socket under a hidden name in the
kubelet's plugins_registry — and only then is the registration socket renamed
to its public name: the kubelet never sees a registration socket whose DRA
endpoint is not already serving, nor a socket with loose permissions.
"""

from __future__ import annotations

import contextlib
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import grpc

SOCKET_MODE = 0o660
DIR_MODE = 0o750
MAX_SOCKET_PATH = 107  # sun_path holds 108 bytes including the terminating NUL


class SocketPathError(ValueError):
    """A socket path longer than unix sockets allow."""


def check_length(path: Path) -> None:
    if len(os.fsencode(path)) > MAX_SOCKET_PATH:
        raise SocketPathError(
            f"kubelet-root: socket path {path} has {len(os.fsencode(path))} bytes, more than "
            f"the {MAX_SOCKET_PATH} a unix socket allows; shorten --kubelet-root or --state-dir"
        )


def prepare_dirs(plugin_dir: Path, registry_dir: Path) -> None:
    """Create the plugin dir (ours: forced to 0750) and the registry dir if missing."""
    plugin_dir.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    os.chmod(plugin_dir, DIR_MODE)
    registry_dir.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)


def serve(
    handlers: list[grpc.GenericRpcHandler[Any, Any]], bind_path: Path, workers: int
) -> grpc.Server:
    """Start a gRPC server on a fresh unix socket at `bind_path`, mode 0660."""
    check_length(bind_path)
    with contextlib.suppress(FileNotFoundError):
        bind_path.unlink()
    server = grpc.server(ThreadPoolExecutor(max_workers=workers), handlers=handlers)
    server.add_insecure_port(f"unix:{bind_path}")
    server.start()
    os.chmod(bind_path, SOCKET_MODE)
    return server


def publish(bound: Path, public: Path) -> None:
    """Rename a bound socket to the name the kubelet watches for (same directory)."""
    os.replace(bound, public)


def remove(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


def remove_if_same(path: Path, inode: int | None) -> None:
    """Remove `path` only if it is still the file with `inode` (not a successor's)."""
    with contextlib.suppress(FileNotFoundError):
        if inode is not None and path.stat().st_ino == inode:
            path.unlink()
