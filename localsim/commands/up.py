"""`trainium-dra up`: start the local cluster in the background (or, with
--foreground, in this process) and say how to use it."""

import shlex
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import replace

from localsim.clusterspec import ClusterSpec
from localsim.commands.down import stop_cluster
from localsim.commands.flags import UpFlags, parse_up
from localsim.commands.hints import EXAMPLES, example, kubeconfig_export, path_export
from localsim.commands.upsettings import (
    UpSettings,
    differences,
    read_settings,
    write_settings,
)
from localsim.controlplane.binaries import Binaries, BinariesMissingError
from localsim.controlplane.children import trainium_dra_argv
from localsim.images import ImageMissingError
from localsim.kueue.install import KueueInstall
from localsim.lws.install import LwsInstall
from localsim.paths import ClusterPaths
from localsim.realnodes.serve import serve_real_nodes
from localsim.standin.serve import serve
from localsim.state import (
    default_state_dir,
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


def start_background(argv: list[str], flags: UpFlags) -> int:
    paths, spec = flags.paths, flags.spec
    if (pid := serve_pid(paths)) is not None:
        running = running_settings(paths, flags.settings)
        changed = differences(running, flags.settings)
        if not changed:
            racks = ", ".join(
                f"{r.name} ({r.generation}, {r.nodes} nodes)" for r in running.spec.racks
            )
            print(f"local cluster already running (pid {pid}): {racks}")
            print("\n".join(usage_lines(paths, running.spec)))
            return 0
        if not flags.recreate:
            print(refusal(pid, paths, changed, argv), file=sys.stderr)
            return 2
        print(f"replacing the local cluster (pid {pid}): " + "; ".join(changed), flush=True)
        stop_cluster(paths)
    leftovers = stray_pids(paths)
    if leftovers or paths.pid_file.exists() or paths.cluster_file.exists():
        terminate(leftovers, paths)
        print(f"removed the state of a cluster that did not stop cleanly ({paths.root})")
    remove_state(paths)
    Binaries.locate()
    make_state_dirs(paths)
    write_settings(paths, flags.settings)
    args = [a for a in argv if a != "--recreate"]
    args += ["--foreground", f"--state-dir={paths.root}"]
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


def running_settings(paths: ClusterPaths, wanted: UpSettings) -> UpSettings:
    """The running cluster's settings; one started with --foreground recorded
    only its spec, so its other flags are taken to be the ones asked for."""
    recorded = read_settings(paths)
    if recorded is not None:
        return recorded
    spec = read_cluster(paths).get("spec")
    return replace(wanted, spec=ClusterSpec.from_json(spec)) if spec else wanted


def refusal(pid: int, paths: ClusterPaths, changed: list[str], argv: list[str]) -> str:
    """Why `up` keeps its hands off a running cluster, and the two ways on."""
    state = [] if paths.root == default_state_dir().absolute() else [f"--state-dir={paths.root}"]
    lines = [
        f"trainium-dra up: a local cluster with other settings is running (pid {pid}, "
        f"{paths.root}):",
        *(f"  {line}" for line in changed),
        "Nothing was changed. To replace it with the cluster asked for:",
        f"  trainium-dra up --recreate {shlex.join(argv)}".rstrip(),
        f"or stop it first: trainium-dra down {shlex.join(state)}".rstrip(),
    ]
    return "\n".join(lines)


def remove_state_keep_log(paths: ClusterPaths) -> None:
    """After a failed start: keep serve.log (it says why), drop the rest."""
    log = paths.serve_log.read_bytes() if paths.serve_log.exists() else b""
    remove_state(paths)
    paths.root.mkdir(parents=True, exist_ok=True)
    paths.serve_log.write_bytes(log)


def main(argv: list[str]) -> int:
    flags = parse_up(argv)
    try:
        if flags.foreground and flags.settings.real_nodes:
            return serve_real_nodes(
                flags.paths,
                flags.spec,
                flags.settings.with_prometheus,
                with_lws=flags.settings.with_lws,
            )
        if flags.foreground:
            return serve(
                flags.paths,
                flags.spec,
                flags.settings.with_prometheus,
                flags.settings.with_kueue,
                flags.settings.kueue_quota,
                with_lws=flags.settings.with_lws,
            )
        if flags.settings.with_kueue:
            KueueInstall.locate()
        if flags.settings.with_lws:
            LwsInstall.locate()
        return start_background(argv, flags)
    except (BinariesMissingError, ImageMissingError, RuntimeError) as error:
        print(f"trainium-dra up: {error}", file=sys.stderr)
        return 1
