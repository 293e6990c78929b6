"""Fixtures shared by all tests.

`control_plane` starts one real control plane for the whole session, or
attaches to a kept-alive one when TRAINIUM_DRA_KUBECONFIG names its kubeconfig
(see docs/development.md). Unit tests never request it, so they run without
the binaries.
"""

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

# The example checks, the chaos harness and the cluster helpers of testbed/
# hold assertions of their own: pytest rewrites them as it does the tests'.
pytest.register_assert_rewrite("testbed")

from driver.localsim.controlplane.plane import ControlPlane  # noqa: E402


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    kept_alive = os.environ.get("TRAINIUM_DRA_KUBECONFIG")
    if kept_alive:
        yield ControlPlane.attach(Path(kept_alive))
        return
    with ControlPlane.running(tmp_path_factory.mktemp("controlplane")) as plane:
        yield plane
