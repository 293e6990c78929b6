"""Fixtures shared by all tests, and how `make test` spreads them over workers.

`control_plane` starts one real control plane for the whole session (one per
pytest-xdist worker), or attaches to a kept-alive one when
TRAINIUM_DRA_KUBECONFIG names its kubeconfig (see docs/development.md). Unit
tests never request it, so they run without the binaries.
"""

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from xdist.scheduler import LoadScopeScheduling

# The example checks, the chaos harness and the cluster helpers of testbed/
# hold assertions of their own: pytest rewrites them as it does the tests'.
pytest.register_assert_rewrite("testbed")

from localsim.controlplane.plane import ControlPlane  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SHARED_CLUSTERS = {
    "tests/e2e/examples": "tests/e2e/examples",
    "tests/chaos": "tests/chaos",
    "tests/realnodes": "real nodes",
    "tests/realnodes_aws": "real nodes",
}
"""Test directories whose tests share one cluster (a package or session
fixture), so one worker runs them all: the group each belongs to. The
real-node directories share a group because the host holds one real-node
cluster at a time."""
SLOWEST_GROUPS = (
    "tests/e2e/examples",
    "tests/whatif/test_live.py",
    "tests/chaos",
    "tests/whatif/test_live_kueue.py",
    "tests/e2e/test_kueue.py",
    "tests/controller/test_busy_fleet.py",
    "tests/controller/test_allocation.py",
)
"""Handed out first (the slowest in `make test`'s durations), so the workers
do not end with one of them alone; the order changes no outcome."""


def group_of(nodeid: str) -> str:
    """The worker group of a test: its shared cluster's, else its file's
    (module fixtures start clusters too)."""
    path = nodeid.split("::", maxsplit=1)[0]
    for directory, group in SHARED_CLUSTERS.items():
        if path.startswith(f"{directory}/"):
            return group
    return path


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> LoadScopeScheduling:
    """Under `pytest -n N`, one worker runs a whole group, in collection order."""
    return WorkerGroups(config, log)


class WorkerGroups(LoadScopeScheduling):
    def _split_scope(self, nodeid: str) -> str:
        return group_of(nodeid)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Order the groups: the slowest first, then the other integration groups,
    then the unit tests, which even out the workers' ends. Within a group the
    collection order stays (some modules' tests run in file order)."""
    groups = {item.nodeid: group_of(item.nodeid) for item in items}
    integration = {groups[item.nodeid] for item in items if item.get_closest_marker("integration")}

    def rank(item: pytest.Item) -> int:
        group = groups[item.nodeid]
        if group in SLOWEST_GROUPS:
            return SLOWEST_GROUPS.index(group)
        return len(SLOWEST_GROUPS) + (group not in integration)

    items.sort(key=rank)


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    kept_alive = os.environ.get("TRAINIUM_DRA_KUBECONFIG")
    if kept_alive:
        yield ControlPlane.attach(Path(kept_alive))
        return
    with ControlPlane.running(tmp_path_factory.mktemp("controlplane")) as plane:
        yield plane
