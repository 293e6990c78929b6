"""What the first-run benchmarks read: the machine's memory in use, the disk a
tree takes, which releases the cache holds, the environment the clone's `make
test` starts with and how its pytest runs ended."""

import os
import sys
from pathlib import Path

import pytest

from benchmarks.first_test import pytest_endings, releases_built, run_env, step_seconds
from benchmarks.firstrun import meminfo_mib, tree_mib

MEMINFO = """MemTotal:       24684000 kB
MemFree:         1000000 kB
MemAvailable:   20588000 kB
HugePages_Total:       0
"""


def test_memory_in_use_is_what_the_machine_could_not_hand_out() -> None:
    total, in_use = meminfo_mib(MEMINFO)
    assert total == 24684000 / 1024
    assert in_use == (24684000 - 20588000) / 1024


def test_a_binary_linked_into_two_release_directories_counts_once(tmp_path: Path) -> None:
    (tmp_path / "v1.37.2").mkdir()
    (tmp_path / "v1.36.3").mkdir()
    helm = tmp_path / "v1.37.2" / "helm"
    helm.write_bytes(b"x" * 2**20)
    one = tree_mib(tmp_path)
    os.link(helm, tmp_path / "v1.36.3" / "helm")
    assert tree_mib(tmp_path) == one >= 1.0


def test_a_release_counts_as_built_when_its_apiserver_is_there(tmp_path: Path) -> None:
    for release, files in {"v1.37.2": ["kube-apiserver", "etcd"], "v1.36.3": ["etcd"]}.items():
        (tmp_path / "k8s" / release).mkdir(parents=True)
        for name in files:
            (tmp_path / "k8s" / release / name).touch()
    assert releases_built(tmp_path) == ["v1.37.2"]
    assert releases_built(tmp_path / "empty") == []


def test_the_clone_starts_as_ci_does(monkeypatch: pytest.MonkeyPatch) -> None:
    venv = str(Path(sys.executable).parent)
    monkeypatch.setenv("PATH", os.pathsep.join([venv, "/usr/local/go/bin", "/usr/bin"]))
    monkeypatch.setenv("MAKEFLAGS", "-j2 --jobserver-auth=3,4")
    monkeypatch.setenv("MAKELEVEL", "1")
    monkeypatch.setenv("TRAINIUM_DRA_BIN_DIR", "/somewhere")
    env = run_env()
    assert env["PATH"] == os.pathsep.join(["/usr/local/go/bin", "/usr/bin"])
    assert env["CI"] == "true"
    assert not {"MAKEFLAGS", "MAKELEVEL", "TRAINIUM_DRA_BIN_DIR"} & set(env)


def test_pytest_endings_and_lane_times_are_read_from_the_log() -> None:
    log = (
        "tests/x.py ....\n"
        "============ 1200 passed, 4 skipped in 1800.00s (0:30:00) ============\n"
        "binaries          | set-up binaries: passed in 812s\n"
        "kind       | kind-e2e: total 300s\n"
        "stand-in   | ===== 1 failed, 300 passed in 600.12s (0:10:00) =====\n"
        "stand-in   | lane stand-in: FAILED (exit 2) in 611s\n"
        "real-nodes | ======== 62 passed in 700.50s (0:11:40) ========\n"
        "real-nodes | lane real-nodes: passed in 1002s\n"
        "=========================== short test summary info ============================\n"
    )
    assert pytest_endings(log) == [
        "1200 passed, 4 skipped in 1800.00s (0:30:00)",
        "stand-in: 1 failed, 300 passed in 600.12s (0:10:00)",
        "real-nodes: 62 passed in 700.50s (0:11:40)",
    ]
    assert step_seconds(log, "lane") == {"stand-in": 611, "real-nodes": 1002}
    assert step_seconds(log, "set-up") == {"binaries": 812}
