"""`trainium-dra down`: stop the local cluster and remove its state, also
after a crash (stray children are found by their recorded pids)."""

from driver.localsim.flags import parse_down
from driver.localsim.realnodes.cluster import cleanup
from driver.localsim.state import remove_state, serve_pid, stray_pids, terminate


def main(argv: list[str]) -> int:
    layout = parse_down(argv)
    pid = serve_pid(layout)
    if pid is not None:
        print(f"stopping the local cluster (pid {pid}) ...", flush=True)
        terminate([pid], layout, timeout=60.0)
    strays = stray_pids(layout)
    if strays:
        print(f"stopping {len(strays)} processes left by a crashed cluster: {strays}")
        terminate(strays, layout)
    existed = layout.root.exists()
    for what in cleanup(layout.nodes_dir):
        print(f"removed {what}")
    remove_state(layout)
    if pid is None and not strays:
        what = "stale state removed" if existed else "nothing to remove"
        print(f"no local cluster running for {layout.root}; {what}")
    else:
        print(f"local cluster stopped; state removed from {layout.root}")
    return 0
