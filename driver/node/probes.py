"""Liveness and readiness that exercise the real gRPC servers over their sockets.

Live: every node answers GetInfo on its registration socket and an empty
NodePrepareResources on its DRA socket. Ready: live, and the kubelet has
confirmed registration through NotifyRegistrationStatus.
"""

from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import grpc

from driver.kubeletplugin import pluginclient
from driver.node.simnode import SimNode

PROBE_TIMEOUT = 2.0
PROBE_THREADS = 8


def node_live(node: SimNode) -> str:
    """ "" when both servers answer, else what failed."""
    try:
        with pluginclient.channel(node.paths.registration_socket) as ch:
            info = pluginclient.get_info(ch, PROBE_TIMEOUT)
        if info.name != node.driver:
            return f"registration socket answers for driver {info.name!r}"
        with pluginclient.channel(node.paths.dra_socket) as ch:
            pluginclient.node_prepare(ch, [], PROBE_TIMEOUT)
    except grpc.RpcError as err:
        return f"gRPC: {err.code().name}: {err.details()}"
    return ""


def report(nodes: Iterable[SimNode], need_registration: bool) -> tuple[bool, dict[str, Any]]:
    """(ok, per-node details) for /healthz (registration not needed) or /readyz.

    Nodes are probed in parallel so a 36-node process answers within a probe timeout.
    """

    def one(node: SimNode) -> str:
        problem = node_live(node)
        if not problem and need_registration and not node.plugin.registration.registered:
            problem = "kubelet has not confirmed registration" + (
                f": {node.plugin.registration.error}" if node.plugin.registration.error else ""
            )
        return problem

    nodes = list(nodes)
    with ThreadPoolExecutor(max_workers=PROBE_THREADS) as pool:
        problems = list(pool.map(one, nodes))
    details = {node.name: problem or "ok" for node, problem in zip(nodes, problems, strict=True)}
    return not any(problems), details
