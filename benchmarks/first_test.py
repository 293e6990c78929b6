"""`make bench-first-test`: a newcomer's first `make test`, timed.

A clone of this repository's HEAD in a temporary directory runs `CI=true
bash .ci/run` (which is exactly `make test`) as root, as CI does, on this
machine's caches as they are: the results say whether ~/.cache/trainium-dra
already held the build of the Kubernetes release under test (warm) or not
(cold), whether it passed, the machine's memory in use during the run, and
the disk the checkout and the caches took before and after. For a cold run,
move the caches aside first. benchmarks/results/first-test.json keeps the
last cold and the last warm run apart (a section each); the README renders
both.
"""

import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.firstrun import MemorySampler, disk_mib, first_run_dirs, run_first
from benchmarks.paths import ROOT
from localsim.controlplane.binaries import k8s_version

PREVIOUS = re.compile(r"^K8S_PREVIOUS := (v\S+)$", re.MULTILINE)
"""The release `make test` runs again after the pinned one (`make test-previous`)."""
PYTEST_SUMMARY = re.compile(r"^(?:([\w-]+) +\| )?=+ (\d+ [a-z]+.* in [\d.]+s.*?) =+$", re.MULTILINE)
"""A pytest run's last line, led by its lane's name in `make test` (hack/lane.sh)."""
STEP_END = re.compile(
    r"^[\w-]+ +\| (lane|set-up) ([\w-]+): (?:passed|FAILED \(exit \d+\)) in (\d+)s$", re.M
)
"""hack/lane.sh's last line for a lane or a set-up step: its name and its wall time."""


def pytest_endings(log: str) -> list[str]:
    """Each pytest run's summary, with its lane's name where it ran in one."""
    return [
        f"{lane}: {summary}" if lane else summary for lane, summary in PYTEST_SUMMARY.findall(log)
    ]


def step_seconds(log: str, kind: str) -> dict[str, int]:
    """The wall time of each of `make test`'s lanes (`kind` "lane") or set-up
    steps ("set-up")."""
    return {name: int(seconds) for k, name, seconds in STEP_END.findall(log) if k == kind}


def releases_built(cache: Path) -> list[str]:
    """The Kubernetes releases whose control plane the project's cache holds."""
    return sorted(p.parent.name for p in (cache / "k8s").glob("*/kube-apiserver"))


def run_env() -> dict[str, str]:
    """This environment as CI's shell would have it: without what the make
    running this benchmark adds (its flags and jobserver) and without this
    virtualenv on PATH, whose python3 would stand in for the machine's."""
    ours = str(Path(sys.executable).parent)
    kept = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("MAKE", "MFLAGS", "VIRTUAL_ENV", "TRAINIUM_DRA_BIN_DIR"))
    }
    path = os.pathsep.join(p for p in kept.get("PATH", "").split(os.pathsep) if p != ours)
    return {**kept, "PATH": path, "CI": "true"}


def clone_head(target: Path) -> str:
    """A clone of this repository's HEAD (its committed state, as CI checks
    out) at `target`; its commit."""
    subprocess.run(
        ["git", "clone", "--quiet", "--no-hardlinks", str(ROOT), str(target)], check=True
    )
    return subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=target, capture_output=True, text=True, check=True
    ).stdout.strip()


def measure(log: Path) -> dict[str, Any]:
    env = run_env()
    with tempfile.TemporaryDirectory(prefix="tdra-first-test-", ignore_cleanup_errors=True) as tmp:
        clone = Path(tmp) / "trainium-dra"
        commit = clone_head(clone)
        previous = PREVIOUS.search((clone / "Makefile").read_text())
        dirs = first_run_dirs(env, clone)
        built = releases_built(dirs["trainium_dra_cache"])
        disk_before = disk_mib(dirs)
        print(f"bench-first-test: `CI=true bash .ci/run` in {clone}, log {log}", flush=True)
        started = time.monotonic()
        with MemorySampler() as memory, log.open("ab") as out:
            code = subprocess.run(
                ["bash", ".ci/run"],
                cwd=clone,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                check=False,
            ).returncode
        seconds = time.monotonic() - started
        disk_after = disk_mib(dirs)
    text = log.read_text(errors="replace")
    return {
        "date": time.strftime("%Y-%m-%d"),
        "git_commit": commit,
        "previous_kubernetes_version": previous.group(1) if previous else None,
        "releases_built_before": built,
        "caches": "warm" if k8s_version() in built else "cold",
        "exit_code": code,
        "passed": code == 0,
        "make_test_seconds": round(seconds, 1),
        "pytest_summaries": pytest_endings(text),
        "set_up_seconds": step_seconds(text, "set-up"),
        "lane_seconds": step_seconds(text, "lane"),
        **memory.results(),
        "disk_before_mib": disk_before,
        "disk_after_mib": disk_after,
    }


def main(argv: list[str] | None = None) -> int:
    description = (__doc__ or "").split("\n\n")[0]
    keys = ("make_test_seconds", "passed")
    why = "`make test` needs root, as in CI"
    return run_first(
        "first-test",
        why_root=why,
        measure=measure,
        keys=keys,
        description=description,
        argv=argv,
        section=lambda results: str(results["caches"]),
    )


if __name__ == "__main__":
    sys.exit(main())
