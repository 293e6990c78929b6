"""`make demo-nodes` shows the container's logs only once it has written them:
a pod is Ready before its container prints anything."""

from pathlib import Path

import pytest

from driver import container
from localsim.commands.demo import shown_all, wait_for_logs


def workload_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> str:
    """What the workload entry point prints when its API never answers."""
    token = tmp_path / "token"
    token.write_text("t")
    monkeypatch.setenv("TRAINIUM_DRA_CLAIM_UID", "uid-1")
    monkeypatch.setenv("TRAINIUM_DRA_WORKLOAD_SOCKET", str(tmp_path / "nobody.sock"))
    monkeypatch.setenv("TRAINIUM_DRA_TOKEN_FILE", str(token))
    assert container.main(["--exit", "--api-wait", "0.5"]) == 1
    return capsys.readouterr().out


def test_the_last_line_of_the_container_marks_its_logs_complete(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    out = workload_output(tmp_path, monkeypatch, capsys)
    lines = out.splitlines()
    assert shown_all(out)
    assert not shown_all("\n".join(lines[:-1]))
    assert not shown_all("")
    assert shown_all(f"NEURON_RT_VISIBLE_CORES=0,1\n{container.HOLDING}=until the pod stops\n")


def test_the_demo_reads_the_logs_until_they_are_complete() -> None:
    written = ["", "NEURON_RT_VISIBLE_CORES=0,1\n", "NEURON_RT_VISIBLE_CORES=0,1\nholding=yes\n"]
    reads: list[str] = []

    def read() -> str:
        reads.append(written[min(len(reads), len(written) - 1)])
        return reads[-1]

    assert wait_for_logs(read, timeout=10.0, interval=0.01) == written[-1]
    assert reads == written


def test_the_demo_says_what_the_container_printed_when_it_never_finishes() -> None:
    with pytest.raises(TimeoutError, match=r"no holding= or error= line in 0s.*CORES=0,1"):
        wait_for_logs(lambda: "NEURON_RT_VISIBLE_CORES=0,1\n", timeout=0.2, interval=0.01)
