"""Run a real-node cluster in the foreground until SIGTERM or SIGINT.

Order: leftovers of a crashed cluster removed; the bridge (the apiserver
listens on its gateway address); the control plane; the nodes; the chart.
On the way down everything is removed again, also outside the state
directory (see `cluster.cleanup`).
"""

import contextlib
import os
from contextlib import AbstractContextManager

from localsim.clusterspec import ClusterSpec
from localsim.controlplane.binaries import Binaries
from localsim.controlplane.plane import ControlPlane
from localsim.images import driver_image, pause_image
from localsim.lws.manager import start_lws
from localsim.paths import ClusterPaths
from localsim.realnodes import netns
from localsim.realnodes.plan import gateway
from localsim.realnodes.prometheus import start_for_real_nodes
from localsim.realnodes.realnodecluster import Images, RealNodeCluster, cleanup
from localsim.serving import Progress, serve_cluster
from localsim.state import write_cluster


def locate_images() -> Images:
    driver, pause = driver_image(), pause_image()
    repository, tag = driver.ref.rsplit(":", 1)
    return Images((pause.archive, driver.archive), pause.ref, repository, tag)


def serve_real_nodes(
    paths: ClusterPaths, spec: ClusterSpec, with_prometheus: bool = False, *, with_lws: bool = False
) -> int:
    progress = Progress()
    binaries = Binaries.locate()
    images = locate_images()
    leftovers = cleanup(paths.nodes_dir)
    if leftovers:
        progress(f"removed what a crashed real-node cluster left: {', '.join(leftovers)}")

    def control_plane() -> AbstractContextManager[ControlPlane]:
        return ControlPlane.running(
            paths.root, binaries=binaries, on_progress=progress, address=gateway(), real_nodes=True
        )

    def when_started(
        cluster: RealNodeCluster, plane: ControlPlane, extras: contextlib.ExitStack
    ) -> str:
        prometheus = None
        # A host process like the control plane: the apiserver calls its webhooks on 127.0.0.1.
        lws = start_lws(paths, plane, progress) if with_lws else None
        if lws is not None:
            extras.callback(lws.stop)
        if with_prometheus:
            prometheus = start_for_real_nodes(paths.root, plane, cluster.nodes)
            extras.callback(prometheus.stop)
            progress(f"prometheus: {prometheus.url}")
        pids = {c.name: c.process.pid for c in plane.components}
        pids.update(cluster.pids())
        if lws is not None:
            pids[lws.child.name] = lws.child.process.pid
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
        return f"{len(cluster.nodes)} real nodes"

    try:
        netns.create_bridge()
        return serve_cluster(
            paths,
            progress,
            control_plane,
            lambda plane: RealNodeCluster(paths, spec, plane, binaries, images),
            when_started,
        )
    finally:
        cleanup(paths.nodes_dir)
