"""Run a real-node cluster in the foreground until SIGTERM or SIGINT.

Order: leftovers of a crashed cluster removed; the bridge (the apiserver
listens on its gateway address); the control plane; the nodes; the chart.
On the way down everything is removed again, also outside the state
directory (see `cluster.cleanup`).
"""

import os

from driver.localsim.clusterspec import ClusterPaths, ClusterSpec
from driver.localsim.controlplane.binaries import Binaries
from driver.localsim.controlplane.plane import ControlPlane
from driver.localsim.images import driver_image, pause_image
from driver.localsim.realnodes import netns
from driver.localsim.realnodes.plan import gateway
from driver.localsim.realnodes.prometheus import start_for_real_nodes
from driver.localsim.realnodes.realnodecluster import Images, RealNodeCluster, cleanup
from driver.localsim.standin.serve import SUPERVISE_INTERVAL, Progress, stop_signals
from driver.localsim.state import make_state_dirs, write_cluster


def locate_images() -> Images:
    driver, pause = driver_image(), pause_image()
    repository, tag = driver.ref.rsplit(":", 1)
    return Images((pause.archive, driver.archive), pause.ref, repository, tag)


def serve_real_nodes(paths: ClusterPaths, spec: ClusterSpec, with_prometheus: bool = False) -> int:
    progress = Progress()
    paths.ready_file.unlink(missing_ok=True)
    make_state_dirs(paths)
    paths.pid_file.write_text(str(os.getpid()))
    binaries = Binaries.locate()
    images = locate_images()
    leftovers = cleanup(paths.nodes_dir)
    if leftovers:
        progress(f"removed what a crashed real-node cluster left: {', '.join(leftovers)}")
    try:
        netns.create_bridge()
        with (
            stop_signals() as stop,
            ControlPlane.running(
                paths.root,
                binaries=binaries,
                on_progress=progress,
                address=gateway(),
                real_nodes=True,
            ) as plane,
        ):
            cluster = RealNodeCluster(paths, spec, plane, binaries, images)
            prometheus = None
            try:
                cluster.start(progress)
                if with_prometheus:
                    prometheus = start_for_real_nodes(paths.root, plane, cluster.nodes)
                    progress(f"prometheus: {prometheus.url}")
                pids = {c.name: c.process.pid for c in plane.components}
                pids.update(cluster.pids())
                pids["serve"] = os.getpid()
                write_cluster(
                    paths,
                    {
                        "spec": spec.to_json(),
                        "kubeconfig": str(paths.kubeconfig),
                        "pids": pids,
                        **cluster.record(),
                        **({"prometheus": prometheus.url} if prometheus else {}),
                    },
                )
                progress(f"ready: {len(cluster.nodes)} real nodes")
                paths.ready_file.touch()
                while not stop.wait(SUPERVISE_INTERVAL):
                    cluster.supervise(progress)
            finally:
                progress("stopping")
                paths.ready_file.unlink(missing_ok=True)
                if prometheus is not None:
                    prometheus.stop()
                cluster.stop()
    finally:
        cleanup(paths.nodes_dir)
        paths.pid_file.unlink(missing_ok=True)
    return 0
