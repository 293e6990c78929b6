"""`trainium-dra workload` waits for the workload API instead of failing at once:
its container can start while the node daemon restarts."""

from pathlib import Path

import pytest

from driver import container


def test_the_workload_waits_for_the_api_then_gives_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    token = tmp_path / "token"
    token.write_text("t")
    monkeypatch.setenv("TRAINIUM_DRA_CLAIM_UID", "uid-1")
    monkeypatch.setenv("TRAINIUM_DRA_WORKLOAD_SOCKET", str(tmp_path / "nobody.sock"))
    monkeypatch.setenv("TRAINIUM_DRA_TOKEN_FILE", str(token))
    assert container.main(["--exit", "--api-wait", "1.5"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert [line.split("=", 1)[0] for line in lines if "api" in line.split("=", 1)[0]] == [
        "waiting_for_api"
    ]
    assert lines[-1].startswith("error=workload API at ")
