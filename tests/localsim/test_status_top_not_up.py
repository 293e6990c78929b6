"""`trainium-dra status` and `top` where no cluster runs: a message that says
so and how to start one, not a traceback."""

import subprocess
from pathlib import Path

import pytest

from localsim.controlplane.children import trainium_dra_argv


@pytest.mark.parametrize("command", ["status", "top"])
def test_no_cluster_is_a_clear_error(tmp_path: Path, command: str) -> None:
    result = subprocess.run(
        trainium_dra_argv([command, f"--state-dir={tmp_path}"]),
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 1
    assert result.stderr.startswith(f"trainium-dra {command}: no local cluster running"), (
        result.stderr
    )
    assert "`trainium-dra up`" in result.stderr and "--real-nodes" in result.stderr
