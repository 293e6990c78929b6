"""`down` removes the host's real-node bridge, namespaces and cgroups only for
a real-node state dir: a stand-in cluster's `down` (every stand-in test ends
with one) must not tear down a real-node cluster another checkout runs."""

from collections.abc import Iterator
from pathlib import Path

import pytest

from localsim.paths import ClusterPaths
from localsim.realnodes.realnodecluster import holds_real_nodes
from localsim.state import remove_state


@pytest.fixture
def paths(tmp_path: Path) -> Iterator[ClusterPaths]:
    """A state dir whose runtime directory (under /tmp) goes with the test."""
    where = ClusterPaths(tmp_path)
    yield where
    remove_state(where)


def test_a_stand_in_state_dir_holds_no_real_nodes(paths: ClusterPaths) -> None:
    for what in ("k", "s", "cdi"):
        Path(paths.node_template(what).replace("{node}", "rack-a-node-0")).mkdir(parents=True)
    assert not holds_real_nodes(paths.nodes_dir)


def test_a_real_node_state_dir_holds_real_nodes(paths: ClusterPaths) -> None:
    etc = paths.nodes_dir / "rack-a-node-0" / "etc"
    etc.mkdir(parents=True)
    (etc / "kubelet.yaml").write_text("kind: KubeletConfiguration\n")
    assert holds_real_nodes(paths.nodes_dir)
