"""`make bench-first-demo`: a newcomer's first `make demo`, timed.

A fresh non-root user whose home directory has a long path (every cache and
the cluster's state go under it), empty caches (Go modules and builds, the
upstream binaries, uv, the virtualenv), a clone of this repository's HEAD in
that home: `make demo` as that user, then `make demo-stop`, then the user and
its home are removed. Needs root, to create and remove the user. Besides the
time it records the machine's memory in use during the run and the disk the
checkout and the caches took after it. The README's first-run figures are
rendered from benchmarks/results/first-demo.json.
"""

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.firstrun import MemorySampler, disk_mib, first_run_dirs, run_first
from benchmarks.paths import ROOT
from benchmarks.report import LoadSampler

USER = "tdra-newcomer"
HOME = Path("/home/a-newcomer-whose-home-directory-has-a-long-name")
UP_LINE = re.compile(r"up in (\d+)s")


def kubernetes_version() -> str:
    """The release `make demo` builds: the one hack/k8s/go.mod pins."""
    text = (ROOT / "hack" / "k8s" / "go.mod").read_text()
    found = re.search(r"k8s\.io/kubernetes (v\d\S*)", text)
    if found is None:
        raise SystemExit("hack/k8s/go.mod pins no k8s.io/kubernetes version")
    return found.group(1)


def user_env() -> dict[str, str]:
    """What a login of the new user has: the machine's environment (its proxy
    and CA settings included), its own home, the system's Python and the Go
    toolchain on PATH; nothing that names root's home, and nothing of the make
    that runs this benchmark."""
    go = shutil.which("go")
    if go is None:
        raise SystemExit("bench-first-demo: no `go` on PATH; the README lists it as a prerequisite")
    ours = os.environ.get("HOME", "/root")
    kept = {
        k: v
        for k, v in os.environ.items()
        if ours not in v and not k.startswith(("MAKE", "MFLAGS", "VIRTUAL_ENV", "PYENV"))
    }
    path = os.pathsep.join([str(Path(go).parent), "/usr/local/bin", "/usr/bin", "/bin"])
    return {**kept, "HOME": str(HOME), "USER": USER, "LOGNAME": USER, "PATH": path}


def as_user(argv: list[str], cwd: Path, log: Path) -> tuple[int, float]:
    """Run `argv` as the new user in `cwd`, its output appended to `log`."""
    started = time.monotonic()
    settings = [f"{k}={v}" for k, v in user_env().items()]
    with log.open("ab") as out:
        done = subprocess.run(
            ["runuser", "-u", USER, "--", "env", "-i", *settings, *argv],
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            check=False,
        )
    return done.returncode, time.monotonic() - started


def remove_user() -> None:
    subprocess.run(["userdel", "--remove", USER], capture_output=True, check=False)
    shutil.rmtree(HOME, ignore_errors=True)


def create_user() -> Path:
    """The user, its home, and a clone of HEAD in it that the user owns."""
    remove_user()
    subprocess.run(
        ["useradd", "--create-home", "--home-dir", str(HOME), "--shell", "/bin/bash", USER],
        check=True,
    )
    clone = HOME / "trainium-dra"
    subprocess.run(["git", "clone", "--quiet", "--no-hardlinks", str(ROOT), str(clone)], check=True)
    subprocess.run(["chown", "-R", f"{USER}:{USER}", str(clone)], check=True)
    return clone


def measure(log: Path) -> dict[str, Any]:
    commit = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()
    clone = create_user()
    print(f"bench-first-demo: `make demo` as {USER} (home {HOME}), log {log}", flush=True)
    try:
        with LoadSampler() as load, MemorySampler() as memory:
            code, seconds = as_user(["make", "demo"], clone, log)
        stop_code, _ = as_user(["make", "demo-stop"], clone, log)
        disk = disk_mib(first_run_dirs(user_env(), clone))
    finally:
        remove_user()
    text = log.read_text(errors="replace")
    up = UP_LINE.search(text)
    return {
        "user": USER,
        "home": str(HOME),
        "git_commit": commit,
        "kubernetes_version": kubernetes_version(),
        "exit_code": code,
        "demo_stop_exit_code": stop_code,
        "ran_the_demo_job": code == 0 and "The cluster keeps running." in text,
        "make_demo_seconds": round(seconds, 1),
        "cluster_up_seconds": int(up.group(1)) if up else None,
        "load_during_1min": load.samples,
        **memory.results(),
        "disk_after_mib": disk,
    }


def main(argv: list[str] | None = None) -> int:
    description = (__doc__ or "").split("\n\n")[0]
    keys = ("make_demo_seconds", "ran_the_demo_job")
    why = "it creates and removes a user"
    return run_first(
        "first-demo", why_root=why, measure=measure, keys=keys, description=description, argv=argv
    )


if __name__ == "__main__":
    sys.exit(main())
