"""`python -m localsim.realnodes.enter`: run a command inside a real
node — in its cgroups, network namespace and mount namespace — as a kind
node's processes run inside its container.

A fresh process is single-threaded, which entering a mount namespace
requires; the command then replaces it (exec), keeping the parent-death
signal its starter set.
"""

import argparse
import ctypes
import os
import sys
from pathlib import Path

CLONE_NEWNS = 0x00020000
CLONE_NEWNET = 0x40000000


def setns(path: str, nstype: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(path, os.O_RDONLY)
    try:
        if libc.setns(fd, nstype) != 0:
            errno = ctypes.get_errno()
            raise OSError(errno, f"setns {path}: {os.strerror(errno)}")
    finally:
        os.close(fd)


def join_cgroups(cgroup_dirs: list[str]) -> None:
    for directory in cgroup_dirs:
        Path(directory, "cgroup.procs").write_text(str(os.getpid()))


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="enter", description=__doc__)
    p.add_argument("--cgroup-dir", action="append", default=[], help="join this cgroup")
    p.add_argument("--netns", required=True, help="network namespace file")
    p.add_argument("--mountns", required=True, help="mount namespace file")
    p.add_argument("command", nargs=argparse.REMAINDER)
    args = p.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        p.error("a command to run is required after --")
    join_cgroups(args.cgroup_dir)
    setns(args.netns, CLONE_NEWNET)
    setns(args.mountns, CLONE_NEWNS)
    os.chdir("/")
    os.execvp(command[0], command)
    return 127


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
