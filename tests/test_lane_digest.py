"""`make test`'s lanes (hack/lane.sh) keep what they print, and a failure is
told again last (hack/lane-digest.sh): a failed lane's pytest summary, its
scripts' "FAILED:" lines and its assertion lines, none of a passing lane's."""

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

FAILING = """
echo 'starting a cluster'
for i in $(seq 200); do echo "component log line $i"; done
echo 'E       AssertionError: waited 90s for 4 pods Running'
echo 'FAILED tests/kind/test_lws_examples.py::test_quad - AssertionError: waited 90s'
echo 'kind-e2e: FAILED: the demo pod ran on the control plane'
exit 3
"""


def run_lane(logs: Path, name: str, script: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(ROOT / "hack/lane.sh"), "lane", name, "bash", "-c", script],
        env={"PATH": "/usr/bin:/bin", "LANE_LOG_DIR": str(logs)},
        capture_output=True,
        text=True,
        check=False,
    )


def digest(logs: Path, env: dict[str, str] | None = None) -> list[str]:
    return subprocess.run(
        [str(ROOT / "hack/lane-digest.sh"), str(logs)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()


def test_a_failed_lane_is_told_again_last_and_a_passing_one_is_not(tmp_path: Path) -> None:
    failed = run_lane(tmp_path, "kind", FAILING)
    passed = run_lane(tmp_path, "stand-in", "echo 'FAILED in a message that passed'")

    assert failed.returncode == 3 and passed.returncode == 0
    last = failed.stdout.splitlines()[-1]
    assert last.startswith("kind              | lane kind: FAILED (exit 3)"), last
    assert (tmp_path / "kind.log").read_text().splitlines()[0] == "starting a cluster"
    assert digest(tmp_path) == [
        f"==== what failed in kind (its whole output: {tmp_path}/kind.log) ====",
        "FAILED tests/kind/test_lws_examples.py::test_quad - AssertionError: waited 90s",
        "kind-e2e: FAILED: the demo pod ran on the control plane",
        "E       AssertionError: waited 90s for 4 pods Running",
    ]


def test_a_lane_that_passes_on_a_second_run_is_no_longer_told(tmp_path: Path) -> None:
    run_lane(tmp_path, "kind", FAILING)
    run_lane(tmp_path, "kind", "echo fixed")
    assert digest(tmp_path) == []


def test_a_step_that_said_why_only_in_passing_is_told_with_its_last_lines(
    tmp_path: Path,
) -> None:
    script = """
for i in $(seq 100); do echo "building image line $i"; done
echo 'kind-load: loading driver.tar failed (attempt 3)'
echo 'ctr: content digest sha256:00: not found'
echo 'make[4]: *** [Makefile:355: kind-load] Error 1'
for i in $(seq 200); do echo "cluster state line $i"; done
exit 2
"""
    run_lane(tmp_path, "kind", script)
    assert digest(tmp_path, {"PATH": "/usr/bin:/bin", "LANE_DIGEST_CONTEXT": "3"}) == [
        f"==== what failed in kind (its whole output: {tmp_path}/kind.log) ====",
        "make[4]: *** [Makefile:355: kind-load] Error 1",
        "---- the lines before make's first error ----",
        "building image line 100",
        "kind-load: loading driver.tar failed (attempt 3)",
        "ctr: content digest sha256:00: not found",
    ]
