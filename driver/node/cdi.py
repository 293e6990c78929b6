"""CDI specs for prepared claims: what the container runtime injects.

One CDI device per claim, named by the claim UID, carrying the claim's core
list (`NEURON_RT_VISIBLE_CORES`, host-global logical ids), its LNC, its
UltraServer mode when AWS's UltraServerConfig set one
(`NEURON_RT_ULTRASERVER_*`, the variables the Neuron runtime reads), the
rack's generation, its fabric ring and addresses, and mounts for the node's workload API socket and
the claim's token file. The socket is reached through a mount of its
directory, not of the socket file: a bind mount pins the inode it was made
from, and a restarted daemon binds a new one.
"""

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from driver.node.durable.atomicfile import remove, write_if_changed

CDI_VERSION = "0.6.0"
CDI_CLASS = "claim"
CONTAINER_RUNTIME_DIR = "/var/run/trainium-dra"
CONTAINER_WORKLOAD_DIR = f"{CONTAINER_RUNTIME_DIR}/workload"
CONTAINER_WORKLOAD_SOCKET = f"{CONTAINER_WORKLOAD_DIR}/workload.sock"
CONTAINER_TOKEN_FILE = f"{CONTAINER_RUNTIME_DIR}/token"


@dataclass(frozen=True)
class ClaimEdits:
    """The inputs of one claim's CDI device."""

    claim_uid: str
    visible_cores: Sequence[int]
    lnc: int
    workload_socket: Path
    token_file: Path
    node_name: str
    ultraserver: str
    server_index: int
    generation: str  # the rack's, so nccom-test without a cluster picks the fabric
    ring: Sequence[int]  # rack chip indexes of the claim's devices, in ring order
    fabric_ips: Sequence[str]  # their fabric addresses, as in the claim's status
    ultraserver_mode: int | None = None  # AWS's UltraServerConfig, for the Neuron runtime


def ultraserver_id(name: str) -> str:
    """The UltraServer's id as the Neuron runtime takes it: 16 hex digits."""
    return hashlib.sha256(name.encode()).hexdigest()[:16]


def cdi_kind(driver: str) -> str:
    """`k8s.<driver>/claim`: the vendor is the driver name, one class for claims."""
    return f"k8s.{driver}/{CDI_CLASS}"


def cdi_device_id(driver: str, claim_uid: str) -> str:
    """The fully qualified CDI device name the kubelet hands to the runtime."""
    return f"{cdi_kind(driver)}={claim_uid}"


def spec_path(cdi_dir: Path, driver: str, claim_uid: str) -> Path:
    """`<cdi dir>/k8s.<driver>-claim_<uid>.json`: one file per claim."""
    return cdi_dir / f"k8s.{driver}-{CDI_CLASS}_{claim_uid}.json"


def claim_spec(driver: str, edits: ClaimEdits) -> dict[str, Any]:
    """The CDI spec document for one claim (pure)."""
    env = [
        f"NEURON_RT_VISIBLE_CORES={','.join(map(str, edits.visible_cores))}",
        f"NEURON_LOGICAL_NC_CONFIG={edits.lnc}",
        f"TRAINIUM_DRA_CLAIM_UID={edits.claim_uid}",
        f"TRAINIUM_DRA_WORKLOAD_SOCKET={CONTAINER_WORKLOAD_SOCKET}",
        f"TRAINIUM_DRA_TOKEN_FILE={CONTAINER_TOKEN_FILE}",
        f"TRAINIUM_DRA_NODE={edits.node_name}",
        f"TRAINIUM_DRA_ULTRASERVER={edits.ultraserver}",
        f"TRAINIUM_DRA_SERVER_INDEX={edits.server_index}",
        f"TRAINIUM_DRA_GENERATION={edits.generation}",
        f"TRAINIUM_DRA_RING={','.join(map(str, edits.ring))}",
        f"TRAINIUM_DRA_FABRIC_IPS={','.join(edits.fabric_ips)}",
    ]
    if edits.ultraserver_mode is not None:
        env += [
            f"NEURON_RT_ULTRASERVER_MODE={edits.ultraserver_mode}",
            f"NEURON_RT_ULTRASERVER_SERVER_ID={ultraserver_id(edits.ultraserver)}",
            f"NEURON_RT_ULTRASERVER_NODE_ID={edits.server_index}",
        ]
    mounts = [
        {
            "hostPath": str(edits.workload_socket.parent),
            "containerPath": CONTAINER_WORKLOAD_DIR,
            "options": ["rbind", "ro"],
        },
        {
            "hostPath": str(edits.token_file),
            "containerPath": CONTAINER_TOKEN_FILE,
            "options": ["rbind", "ro"],
        },
    ]
    return {
        "cdiVersion": CDI_VERSION,
        "kind": cdi_kind(driver),
        "devices": [{"name": edits.claim_uid, "containerEdits": {"env": env, "mounts": mounts}}],
    }


def host_path(mounts: Sequence[Mapping[str, Any]], container_path: str) -> Path | None:
    """The host path behind `container_path` through the deepest mount holding it."""
    inside = PurePosixPath(container_path)
    best: tuple[PurePosixPath, str] | None = None
    for mount in mounts:
        target = PurePosixPath(mount["containerPath"])
        if (inside == target or target in inside.parents) and (
            best is None or len(target.parts) > len(best[0].parts)
        ):
            best = (target, mount["hostPath"])
    if best is None:
        return None
    return Path(best[1]) / inside.relative_to(best[0])


def spec_bytes(driver: str, edits: ClaimEdits) -> bytes:
    """The spec file's exact content, so a damaged or stale file is told from a good one."""
    return (json.dumps(claim_spec(driver, edits), indent=2, sort_keys=True) + "\n").encode()


def write_spec(cdi_dir: Path, driver: str, edits: ClaimEdits) -> bool:
    """Write the claim's spec by rename (no fsync: start-up re-derives it) unless
    the file already holds it; True if it was written."""
    path = spec_path(cdi_dir, driver, edits.claim_uid)
    return write_if_changed(path, spec_bytes(driver, edits), mode=0o644)


def remove_spec(cdi_dir: Path, driver: str, claim_uid: str) -> bool:
    return remove(spec_path(cdi_dir, driver, claim_uid))


def spec_claim_uids(cdi_dir: Path, driver: str) -> set[str]:
    """UIDs of the claims that have a spec of this driver in `cdi_dir`."""
    prefix, suffix = f"k8s.{driver}-{CDI_CLASS}_", ".json"
    return {
        p.name[len(prefix) : -len(suffix)]
        for p in cdi_dir.glob(f"{prefix}*{suffix}")
        if len(p.name) > len(prefix) + len(suffix)
    }
