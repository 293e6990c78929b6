"""A private /etc for Kueue's manager, holding only its metrics certificate.

Kueue 0.17 reads the metrics endpoint's certificate from the fixed path
/etc/kueue/metrics/certs whenever its own certificate management is off, and
exits if it is missing. Rather than write into the machine's /etc, the manager
runs in a mount namespace of its own (inside a user namespace, so no root is
needed) whose /etc is an empty tmpfs with the cluster-issued certificate
directory bound at that path. The manager talks to 127.0.0.1 only and reads
nothing else from /etc.
"""

import ctypes
import os
from collections.abc import Callable
from pathlib import Path

METRICS_CERT_DIR = Path("/etc/kueue/metrics/certs")

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
MS_BIND = 0x1000
MS_REC = 0x4000
MS_PRIVATE = 0x40000


def _write(path: str, text: str) -> None:
    with open(path, "w") as out:
        out.write(text)


def private_etc(cert_dir: Path) -> Callable[[], None]:
    """A function that, run in the child before exec, gives it the private
    /etc; on failure it says which step failed on the child's stderr (the
    manager's log) and raises."""
    uid, gid = os.getuid(), os.getgid()
    libc = ctypes.CDLL(None, use_errno=True)

    def check(result: int, step: str) -> None:
        if result != 0:
            errno = ctypes.get_errno()
            message = (
                f"trainium-dra: Kueue's private /etc: {step} failed: {os.strerror(errno)}; "
                "the manager needs user and mount namespaces "
                "(sysctl kernel.unprivileged_userns_clone=1, or run as root)\n"
            )
            os.write(2, message.encode())
            raise OSError(errno, message)

    def enter() -> None:
        check(libc.unshare(CLONE_NEWUSER | CLONE_NEWNS), "unshare(user, mount)")
        _write("/proc/self/setgroups", "deny")
        _write("/proc/self/uid_map", f"{uid} {uid} 1")
        _write("/proc/self/gid_map", f"{gid} {gid} 1")
        check(libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None), "making / private")
        check(libc.mount(b"tmpfs", b"/etc", b"tmpfs", 0, b"mode=0755"), "a tmpfs on /etc")
        METRICS_CERT_DIR.mkdir(parents=True)
        check(
            libc.mount(str(cert_dir).encode(), str(METRICS_CERT_DIR).encode(), None, MS_BIND, None),
            f"binding {cert_dir} at {METRICS_CERT_DIR}",
        )

    return enter
