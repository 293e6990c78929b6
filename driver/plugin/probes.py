"""Liveness and readiness that exercise the real gRPC servers over their sockets.

Live: every node answers GetInfo on its registration socket and an empty
NodePrepareResources on its DRA socket. Ready: live, and the kubelet has
confirmed registration through NotifyRegistrationStatus.
"""

from collections.abc import Iterable
from typing import Any

import grpc

from driver.plugin import kubeletclient
from driver.plugin.node import SimNode

PROBE_TIMEOUT = 2.0


def node_live(node: SimNode) -> str:
    """ "" when both servers answer, else what failed."""
    try:
        with kubeletclient.channel(node.layout.registration_socket) as ch:
            info = kubeletclient.get_info(ch, PROBE_TIMEOUT)
        if info.name != node.driver:
            return f"registration socket answers for driver {info.name!r}"
        with kubeletclient.channel(node.layout.dra_socket) as ch:
            kubeletclient.node_prepare(ch, [], PROBE_TIMEOUT)
    except grpc.RpcError as err:
        return f"gRPC: {err.code().name}: {err.details()}"
    return ""


def report(nodes: Iterable[SimNode], need_registration: bool) -> tuple[bool, dict[str, Any]]:
    """(ok, per-node details) for /healthz (registration not needed) or /readyz."""
    details: dict[str, Any] = {}
    ok = True
    for node in nodes:
        problem = node_live(node)
        if not problem and need_registration and not node.registration.registered:
            problem = "kubelet has not confirmed registration" + (
                f": {node.registration.error}" if node.registration.error else ""
            )
        details[node.name] = problem or "ok"
        ok = ok and not problem
    return ok, details
