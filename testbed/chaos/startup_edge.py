"""A damaged checkpoint through the daemon's own start-up code, in process.

Starting a daemon process per case costs seconds, so the real-process edge
(`daemon_edges.check_checkpoint_start`) runs a few cases; this one runs the
same start-up steps the daemon runs on the same damaged files (open the
checkpoint and its journal, drop unfinished records, compact, rewrite every
claim's files) thousands of times. Start-up reads nothing from the cluster,
so the reader it is given fails the case if it is asked anything.
"""

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from driver.devicemodel.placement import NodePlace
from driver.node import cdi
from driver.node.durable.checkpoint import PREPARE_COMPLETED, Checkpoint, CheckpointError
from driver.node.durable.groupcommit import NodeState
from driver.node.metrics import DriverMetrics
from driver.node.paths import NodePaths
from driver.node.prepare import Preparer, ensure_dirs
from testbed.chaos.fuzzing import ACCEPTED, REFUSED
from testbed.chaos.parser_edges import CHECKPOINT_FIXES, corrupt
from testbed.rack import DRIVER, RACK, SITE

PLACE = NodePlace(SITE.nodes[0], SITE.rack_id, 0, RACK)


class NoCluster:
    """A cluster reader for a start-up that must not read the cluster."""

    def get_claim(self, namespace: str, name: str) -> dict[str, Any] | None:
        raise AssertionError(f"start-up read claim {namespace}/{name} from the cluster")

    def attributes(self, keys: set[tuple[str, str]]) -> dict[tuple[str, str], Any]:
        raise AssertionError("start-up read device attributes from the cluster")

    def default_lnc(self, ultraserver: str) -> int | None:
        raise AssertionError("start-up read the UltraServer from the cluster")


@contextmanager
def scratch() -> Iterator[Path]:
    """Where each case gets a fresh node directory (in memory when possible)."""
    shm = Path("/dev/shm")
    path = Path(tempfile.mkdtemp(prefix="chaos-start-", dir=shm if shm.is_dir() else None))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def check_restore(root: Path, case: Any) -> str:
    """Start-up over a damaged checkpoint: refuses by name without touching the
    file, or keeps every finished claim with its files in place."""
    data = corrupt(case)
    node_dir = Path(tempfile.mkdtemp(dir=root))
    try:
        paths = NodePaths(
            kubelet_root=node_dir / "kubelet",
            driver=DRIVER,
            state_dir=node_dir / "state",
            cdi_dir=node_dir / "cdi",
        )
        ensure_dirs(paths)
        paths.checkpoint.write_bytes(data)
        try:
            checkpoint = Checkpoint(paths.checkpoint)
        except CheckpointError as err:
            message = str(err)
            assert message.startswith(f"{paths.checkpoint}: "), message
            assert any(fix in message for fix in CHECKPOINT_FIXES), message
            assert paths.checkpoint.read_bytes() == data, "a refused checkpoint was rewritten"
            return REFUSED
        finished = {uid for uid, r in checkpoint.claims.items() if r.state == PREPARE_COMPLETED}
        preparer = Preparer(
            driver=DRIVER,
            place=PLACE,
            paths=paths,
            reader=NoCluster(),
            state=NodeState(checkpoint),
            metrics=DriverMetrics(CollectorRegistry()),
            release_claim=lambda uid: None,
        )
        preparer.restore()
        kept = Checkpoint(paths.checkpoint).claims
        assert kept.keys() == finished, f"finished claims lost at start: {finished - kept.keys()}"
        for uid in finished:
            assert cdi.spec_path(paths.cdi_dir, DRIVER, uid).exists(), f"no CDI spec for {uid}"
        return ACCEPTED
    finally:
        shutil.rmtree(node_dir, ignore_errors=True)
