"""The real nodes' network: a host bridge with the gateway address, and per
node a network namespace joined to it by a veth pair, as a kind network
joins node containers. Everything is named with a project prefix, so `down`
finds and removes exactly what `up` made."""

import subprocess

from localsim.realnodes.plan import (
    BRIDGE,
    NETNS_PREFIX,
    NODE_SUBNET,
    RealNode,
    gateway,
)


class NetworkError(RuntimeError):
    """An `ip` command failed; the message names the command and the fix."""


def ip(*args: str, netns: str | None = None, check: bool = True) -> str:
    argv = ["ip", *(["-n", netns] if netns else []), *args]
    result = subprocess.run(argv, capture_output=True, text=True, check=False)
    if check and result.returncode != 0:
        raise NetworkError(
            f"`{' '.join(argv)}` failed: {result.stderr.strip()} "
            "(real nodes need root and the iproute2 package; `trainium-dra down` removes "
            "what an earlier cluster left)"
        )
    return result.stdout


def link_exists(name: str) -> bool:
    return (
        subprocess.run(["ip", "link", "show", name], capture_output=True, check=False).returncode
        == 0
    )


def create_bridge() -> None:
    if link_exists(BRIDGE):
        raise NetworkError(
            f"the bridge {BRIDGE} already exists: another real-node cluster runs, or one did not "
            "stop cleanly; stop it with `trainium-dra down` (or `ip link del "
            f"{BRIDGE}` if none runs)"
        )
    ip("link", "add", BRIDGE, "type", "bridge")
    ip("addr", "add", f"{gateway()}/{NODE_SUBNET.prefixlen}", "dev", BRIDGE)
    ip("link", "set", BRIDGE, "up")


def create_node_network(node: RealNode) -> None:
    """Namespace, veth into the bridge, the node's address, and routes: the
    node reaches everything through the gateway; the host reaches the node's
    pods through the node."""
    ip("netns", "add", node.netns)
    ip("link", "add", node.veth, "type", "veth", "peer", "name", "eth0", "netns", node.netns)
    ip("link", "set", node.veth, "master", BRIDGE, "up")
    ip("link", "set", "lo", "up", netns=node.netns)
    ip("addr", "add", f"{node.ip}/{NODE_SUBNET.prefixlen}", "dev", "eth0", netns=node.netns)
    ip("link", "set", "eth0", "up", netns=node.netns)
    ip("route", "add", "default", "via", gateway(), netns=node.netns)
    ip("route", "add", node.pod_cidr, "via", node.ip, "dev", BRIDGE)


def netns_path(node: RealNode) -> str:
    return f"/run/netns/{node.netns}"


def leftover_namespaces() -> list[str]:
    names = [line.split()[0] for line in ip("netns", "list").splitlines() if line.strip()]
    return [n for n in names if n.startswith(NETNS_PREFIX)]


def remove_all(*, bridge: bool = True) -> list[str]:
    """Delete every node namespace (their veths and routes go with them) and,
    with `bridge`, the bridge; returns what was removed."""
    removed = []
    for name in leftover_namespaces():
        ip("netns", "del", name, check=False)
        removed.append(f"netns {name}")
    if bridge and link_exists(BRIDGE):
        ip("link", "del", BRIDGE, check=False)
        removed.append(f"bridge {BRIDGE}")
    return removed
