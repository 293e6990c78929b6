"""Run a container's simulated workload through the node's workload API.

A real container reads `TRAINIUM_DRA_WORKLOAD_SOCKET` and
`TRAINIUM_DRA_TOKEN_FILE` from its CDI environment and finds both through its
CDI mounts; the kubelet stand-in plays the container and follows the same
edits back to the host paths.
"""

import json
from collections.abc import Mapping
from typing import Any

from driver.claimendpoint import ClaimEndpoint, ClaimEndpointError
from driver.node.cdi import host_path
from localsim.standin.kubelet import ContainerEdits
from simdevice.workloads import WorkloadError

WORKLOAD_ANNOTATION = "trainium.sim.dev/workload"
"""Pod annotation: a JSON workload spec (simdevice.workloads) each container
with a claim of the driver runs on its claim's cores."""


def workload_spec(annotations: Mapping[str, str] | None) -> dict[str, Any] | None:
    """The pod's workload, or None when it declares none; WorkloadError when
    the annotation is not a workload."""
    text = (annotations or {}).get(WORKLOAD_ANNOTATION)
    if text is None:
        return None
    try:
        spec = json.loads(text)
    except json.JSONDecodeError as err:
        raise WorkloadError(
            f"annotation {WORKLOAD_ANNOTATION}: not JSON ({err.msg} at column {err.colno}); "
            'write e.g. {"kind": "gemm", "m": 4096, "n": 4096, "k": 4096}'
        ) from err
    if not isinstance(spec, dict) or "kind" not in spec:
        raise WorkloadError(
            f"annotation {WORKLOAD_ANNOTATION}: must be a JSON object with a 'kind', got {text!r}"
        )
    return spec


def endpoint_from_edits(edits: ContainerEdits) -> ClaimEndpoint | None:
    """None when the container got no claim of the driver."""
    env = edits.env
    uid = env.get("TRAINIUM_DRA_CLAIM_UID")
    if uid is None:
        return None
    try:
        socket, token_file = (
            host_path(edits.mounts, env[key])
            for key in ("TRAINIUM_DRA_WORKLOAD_SOCKET", "TRAINIUM_DRA_TOKEN_FILE")
        )
    except KeyError as err:
        raise ClaimEndpointError(f"CDI edits of claim {uid} lack {err}") from err
    if socket is None or token_file is None:
        raise ClaimEndpointError(f"CDI edits of claim {uid} lack the mount of its socket or token")
    try:
        token = token_file.read_text().strip()
    except OSError as err:
        raise ClaimEndpointError(f"token of claim {uid}: {err}") from err
    return ClaimEndpoint(uid, socket, token)
