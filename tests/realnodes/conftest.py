"""One real-node cluster for the whole package: starting one costs minutes
and the host holds only one (the bridge tdra0). Every module's tests share
it; the test of `trainium-dra down` ends it, so it runs last."""

from collections.abc import Generator, Iterator
from pathlib import Path

import pytest

from localsim.realnodes.realnodecluster import cleanup
from testbed.localcluster import running_cluster
from testbed.realnodes import RealCluster, host_state, real_cluster

START_TIMEOUT = 900.0
"""Cold: four nodes import the images and the chart's pods start on them."""

DOWN_TEST = "test_down_leaves_nothing_behind"
HERE = Path(__file__).parent


@pytest.fixture(scope="package")
def host_before(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """What the host looked like before the cluster started, less what a
    killed earlier cluster left: `up` removes those leftovers (its network
    namespaces, bridge and cgroup) before it starts, so `down` must not bring
    them back. A `make test` interrupted in this lane leaves them for the next
    run; here the same cleanup runs first, on a state directory of no nodes."""
    cleanup(tmp_path_factory.mktemp("no-nodes"))
    return host_state()


@pytest.fixture(scope="package")
def real(host_before: dict[str, str]) -> Iterator[RealCluster]:
    with running_cluster(
        "--real-nodes", "--with-prometheus", start_timeout=START_TIMEOUT
    ) as cluster:
        yield real_cluster(cluster)


FAILED_CALL = pytest.StashKey[bool]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item,
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report: pytest.TestReport = yield
    if report.when == "call":
        item.stash[FAILED_CALL] = report.failed
    return report


@pytest.fixture(autouse=True)
def namespaces_of_a_failed_test_removed(request: pytest.FixtureRequest) -> Iterator[None]:
    """A failed test's namespaces go before the next test starts: its claims (a
    whole server) would otherwise starve every test after it. A passing test's
    stay as the test left them: the daemon-kill trial counts the pods that
    tests before it left running on its node as pods it must not disturb.
    Tests that use no cluster (the pure ones beside them) start none."""
    if request.node.name == DOWN_TEST or "real" not in request.fixturenames:
        yield
        return
    real: RealCluster = request.getfixturevalue("real")
    before = set(real.kubectl("get", "namespaces", "-o", "name").split())
    yield
    if not request.node.stash.get(FAILED_CALL, False):
        return
    made = set(real.kubectl("get", "namespaces", "-o", "name").split()) - before
    if made:
        real.kubectl("delete", *sorted(made), "--ignore-not-found", "--timeout=180s")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Move the down test behind this package's other tests (files run in
    name order, so a module after test_real_nodes.py would find no cluster)."""
    down = [item for item in items if item.path.parent == HERE and item.name == DOWN_TEST]
    others = [item for item in items if item not in down]
    ours = [i for i, item in enumerate(others) if item.path.parent == HERE]
    if down and ours:
        items[:] = others[: ours[-1] + 1] + down + others[ours[-1] + 1 :]
