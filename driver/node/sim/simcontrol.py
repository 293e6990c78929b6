"""The simulator's controls, on a listener of their own: /sim/v1/nodes (where
each node listens) and /sim/v1/faults (inject or clear hardware faults).

A fault fails chips, and failed chips get NoExecute taints that evict pods:
whoever reaches this listener can do that. So it is not on the metrics port.
By default it is a unix socket only the daemon's user may open (mode 0600);
on a TCP address other than loopback every request must carry the bearer
token of --sim-control-token-file, and the daemon does not start exposed
without one.
"""

import contextlib
import json
import os
import socket
from collections.abc import Sequence
from pathlib import Path

from driver.httpendpoint import HTTPEndpoint, Reply, json_reply
from driver.kubeletplugin import sockets
from driver.node.sim.simaccess import (
    ADDRESS_FLAG,
    UNIX_PREFIX,
    BearerGuard,
    SimControlAddress,
    SimControlError,
)
from driver.node.simnode import SimNode
from simdevice.faults import FAULT_KINDS, Fault, FaultKind

FAULTS_PATH = "/sim/v1/faults"
NODES_PATH = "/sim/v1/nodes"
SOCKET_MODE = 0o600


class FaultRequestError(ValueError):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def parse_fault_request(body: bytes, node_names: Sequence[str]) -> tuple[str, Fault]:
    """The node and fault a request body names; FaultRequestError names the field."""
    try:
        doc = json.loads(body or b"{}")
    except ValueError as err:
        raise FaultRequestError(422, f"body: not JSON ({err})") from err
    if not isinstance(doc, dict):
        raise FaultRequestError(422, "body: must be an object with node, chip and kind")
    node = doc.get("node")
    if node not in node_names:
        raise FaultRequestError(404, f"node: {node!r} is not one of {', '.join(node_names)}")
    kind = doc.get("kind")
    if kind not in FAULT_KINDS:
        raise FaultRequestError(422, f"kind: {kind!r} is not one of {', '.join(FAULT_KINDS)}")
    if "chip" not in doc:
        raise FaultRequestError(422, "chip: required")
    try:
        return str(node), Fault(FaultKind(kind), int(doc["chip"]), doc.get("core"))
    except (TypeError, ValueError) as err:
        raise FaultRequestError(422, str(err)) from err


def unix_listener(path: Path) -> socket.socket:
    """A unix socket at `path` only its owner may open; listening only once it is 0600."""
    sockets.check_length(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(str(path))
        os.chmod(path, SOCKET_MODE)
        sock.listen(64)
    except OSError as err:
        sock.close()
        raise SimControlError(f"{ADDRESS_FLAG}: cannot listen on {path} ({err.strerror})") from err
    return sock


class SimControlServer(HTTPEndpoint):
    def __init__(
        self, address: SimControlAddress, nodes: Sequence[SimNode], token: str | None
    ) -> None:
        self.nodes = nodes
        self.address = address
        listener = unix_listener(address.unix_path) if address.unix_path is not None else None
        super().__init__(
            address.host,
            address.port,
            {
                ("GET", NODES_PATH): lambda _: json_reply(200, [n.describe() for n in self.nodes]),
                ("POST", FAULTS_PATH): lambda body: self.apply_fault(body, inject=True),
                ("DELETE", FAULTS_PATH): lambda body: self.apply_fault(body, inject=False),
            },
            flag=ADDRESS_FLAG,
            listener=listener,
            guard=BearerGuard(token) if token else None,
        )

    def where(self) -> str:
        """The address as a client names it (the chosen port, when port 0 was asked for)."""
        if self.address.unix_path is not None:
            return f"{UNIX_PREFIX}{self.address.unix_path}"
        return f"{self.address.host}:{self.port}"

    def stop(self) -> None:
        super().stop()
        if self.address.unix_path is not None:
            with contextlib.suppress(FileNotFoundError):
                self.address.unix_path.unlink()

    def apply_fault(self, body: bytes, inject: bool) -> Reply:
        """Inject (POST) or clear (DELETE) a simulated fault on one node's server."""
        try:
            name, fault = parse_fault_request(body, [n.name for n in self.nodes])
            node = next(n for n in self.nodes if n.name == name)
            (node.sim.inject if inject else node.sim.clear)(fault)
        except FaultRequestError as err:
            return json_reply(err.code, {"error": str(err)})
        except ValueError as err:
            return json_reply(422, {"error": str(err)})
        return json_reply(
            200,
            {
                "node": node.name,
                "health": {str(c): h.state for c, h in node.sim.chip_health().items()},
            },
        )
