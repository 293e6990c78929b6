"""`trainium-dra up`: start the local cluster in the background (or, with
--foreground, in this process) and say how to use it."""

import subprocess
import sys
import time
from collections.abc import Sequence

from driver.localsim.clusterspec import ClusterPaths, ClusterSpec
from driver.localsim.commands.flags import parse_up
from driver.localsim.commands.hints import EXAMPLES, example, kubeconfig_export, path_export
from driver.localsim.controlplane.binaries import Binaries, BinariesMissingError
from driver.localsim.controlplane.children import trainium_dra_argv
from driver.localsim.images import ImageMissingError
from driver.localsim.kueue.install import KueueInstall
from driver.localsim.realnodes.serve import serve_real_nodes
from driver.localsim.standin.serve import serve
from driver.localsim.state import (
    make_state_dirs,
    read_cluster,
    remove_state,
    serve_pid,
    stray_pids,
    terminate,
)

UP_TIMEOUT = 900.0
"""Real nodes import images into every containerd before the chart's pods start."""


def usage_lines(paths: ClusterPaths, spec: ClusterSpec, more: Sequence[str] = ()) -> list[str]:
    """How to use and stop the cluster; `more` are commands of the caller's own."""
    rack = spec.racks[0]
    return [
        "",
        "Use it with:",
        f"  {path_export()}",
        f"  {kubeconfig_export(paths.kubeconfig)}",
        f"  kubectl get ultraservers,nodes -l trainium.sim.dev/ultraserver={rack.name}",
        f"  kubectl apply -f {example(EXAMPLES / 'single-core')}",
        "  trainium-dra status            # racks, devices, allocations, unhealthy devices",
        f"  trainium-dra top --rack {rack.name}   # live per-core utilization",
        *(f"  {line}" for line in more),
        "Stop it with: trainium-dra down   (or: make demo-stop)",
        f"Logs: {paths.logs}/ and {paths.serve_log}",
    ]


def start_background(argv: list[str], paths: ClusterPaths, spec: ClusterSpec) -> int:
    if (pid := serve_pid(paths)) is not None:
        running = ClusterSpec.from_json(read_cluster(paths).get("spec") or spec.to_json())
        racks = ", ".join(f"{r.name} ({r.generation}, {r.nodes} nodes)" for r in running.racks)
        print(f"local cluster already running (pid {pid}): {racks}")
        print("\n".join(usage_lines(paths, running)))
        return 0
    leftovers = stray_pids(paths)
    if leftovers or paths.pid_file.exists() or paths.cluster_file.exists():
        terminate(leftovers, paths)
        print(f"removed the state of a cluster that did not stop cleanly ({paths.root})")
    remove_state(paths)
    Binaries.locate()
    make_state_dirs(paths)
    args = [*argv, "--foreground", f"--state-dir={paths.root}"]
    with paths.serve_log.open("wb") as out:
        process = subprocess.Popen(
            trainium_dra_argv(["up", *args]),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    started = time.monotonic()
    shown = 0
    while not paths.ready_file.exists():
        lines = paths.serve_log.read_text(errors="replace").splitlines()
        for line in lines[shown:]:
            print(f"  {line}", flush=True)
        shown = len(lines)
        if process.poll() is not None:
            print(f"local cluster failed to start; see {paths.serve_log}", file=sys.stderr)
            remove_state_keep_log(paths)
            return 1
        if time.monotonic() - started > UP_TIMEOUT:
            terminate([process.pid], paths)
            print(f"local cluster not ready after {UP_TIMEOUT:.0f}s; see {paths.serve_log}")
            return 1
        time.sleep(0.3)
    for line in paths.serve_log.read_text(errors="replace").splitlines()[shown:]:
        print(f"  {line}", flush=True)
    elapsed = time.monotonic() - started
    print(f"\nLocal cluster running (pid {process.pid}), up in {elapsed:.0f}s.")
    print(f"KUBECONFIG={paths.kubeconfig}")
    print("\n".join(usage_lines(paths, spec)))
    return 0


def remove_state_keep_log(paths: ClusterPaths) -> None:
    """After a failed start: keep serve.log (it says why), drop the rest."""
    log = paths.serve_log.read_bytes() if paths.serve_log.exists() else b""
    remove_state(paths)
    paths.root.mkdir(parents=True, exist_ok=True)
    paths.serve_log.write_bytes(log)


def main(argv: list[str]) -> int:
    flags = parse_up(argv)
    try:
        if flags.foreground and flags.real_nodes:
            return serve_real_nodes(flags.paths, flags.spec, flags.with_prometheus)
        if flags.foreground:
            return serve(
                flags.paths,
                flags.spec,
                flags.with_prometheus,
                flags.with_kueue,
                flags.kueue_quota,
            )
        if flags.with_kueue:
            KueueInstall.locate()
        return start_background(argv, flags.paths, flags.spec)
    except (BinariesMissingError, ImageMissingError, RuntimeError) as error:
        print(f"trainium-dra up: {error}", file=sys.stderr)
        return 1
