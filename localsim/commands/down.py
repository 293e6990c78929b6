"""`trainium-dra down`: stop the local cluster and remove its state, also
after a crash (stray children are found by their recorded pids)."""

from localsim.commands.flags import parse_down
from localsim.paths import ClusterPaths
from localsim.realnodes.realnodecluster import cleanup, holds_real_nodes
from localsim.state import remove_state, serve_pid, stray_pids, terminate


def main(argv: list[str]) -> int:
    stop_cluster(parse_down(argv))
    return 0


def stop_cluster(paths: ClusterPaths) -> None:
    """Stop the cluster of `paths`, whatever state it is in, and remove its state."""
    pid = serve_pid(paths)
    if pid is not None:
        print(f"stopping the local cluster (pid {pid}) ...", flush=True)
        terminate([pid], paths, timeout=60.0)
    strays = stray_pids(paths)
    if strays:
        print(f"stopping {len(strays)} processes left by a crashed cluster: {strays}")
        terminate(strays, paths)
    existed = paths.root.exists()
    if holds_real_nodes(paths.nodes_dir):
        for what in cleanup(paths.nodes_dir):
            print(f"removed {what}")
    remove_state(paths)
    if pid is None and not strays:
        what = "stale state removed" if existed else "nothing to remove"
        print(f"no local cluster running for {paths.root}; {what}")
    else:
        print(f"local cluster stopped; state removed from {paths.root}")
