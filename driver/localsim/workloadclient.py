"""Run a container's simulated workload through the node's workload API.

A real container reads `TRAINIUM_DRA_WORKLOAD_SOCKET` and
`TRAINIUM_DRA_TOKEN_FILE` from its CDI environment and finds both through its
CDI mounts; the kubelet stand-in plays the container and follows the same
edits back to the host paths.
"""

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from driver.localsim.kubelet import ContainerEdits
from driver.plugin.cdi import host_path

WORKLOAD_ANNOTATION = "trainium.sim.dev/workload"
"""Pod annotation: a JSON workload spec (simdevice.workloads) each container
with a claim of the driver runs on its claim's cores."""

TIMEOUT = 60.0
"""Planning a large job can take seconds of CPU on a busy machine."""


class WorkloadError(RuntimeError):
    """The workload could not be started; the message is what the pod shows."""


class WorkloadUnreachableError(WorkloadError):
    """Nothing answers on the socket: the node daemon is down or restarting."""


def workload_spec(annotations: Mapping[str, str] | None) -> dict[str, Any] | None:
    """The pod's workload, or None when it declares none."""
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


@dataclass(frozen=True)
class ClaimEndpoint:
    """Where and as whom a container talks to the workload API."""

    claim_uid: str
    socket: Path
    token: str

    @classmethod
    def from_edits(cls, edits: ContainerEdits) -> "ClaimEndpoint | None":
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
            raise WorkloadError(f"CDI edits of claim {uid} lack {err}") from err
        if socket is None or token_file is None:
            raise WorkloadError(f"CDI edits of claim {uid} lack the mount of its socket or token")
        try:
            token = token_file.read_text().strip()
        except OSError as err:
            raise WorkloadError(f"token of claim {uid}: {err}") from err
        return cls(uid, socket, token)

    def _request(self, method: str, path: str, body: Any = None) -> Any:
        transport = httpx.HTTPTransport(uds=str(self.socket))
        try:
            with httpx.Client(transport=transport, base_url="http://node", timeout=TIMEOUT) as http:
                response = http.request(
                    method,
                    f"/v1/claims/{self.claim_uid}{path}",
                    json=body,
                    headers={"Authorization": f"Bearer {self.token}"},
                )
        except httpx.TransportError as err:
            raise WorkloadUnreachableError(f"workload API at {self.socket}: {err}") from err
        except httpx.HTTPError as err:
            raise WorkloadError(f"workload API at {self.socket}: {err}") from err
        if response.status_code >= 400:
            detail = response.json().get("detail", response.text)
            raise WorkloadError(f"workload API {response.status_code}: {detail}")
        return response.json()

    @classmethod
    def from_environment(cls, env: Mapping[str, str]) -> "ClaimEndpoint":
        """Inside a container: the CDI environment names the mounted socket and token."""
        try:
            uid = env["TRAINIUM_DRA_CLAIM_UID"]
            socket = Path(env["TRAINIUM_DRA_WORKLOAD_SOCKET"])
            token_file = Path(env["TRAINIUM_DRA_TOKEN_FILE"])
        except KeyError as err:
            raise WorkloadError(
                f"{err.args[0]} is not set: this container got no claim of the driver "
                "(add a resourceClaims entry to the pod and the container's resources.claims)"
            ) from None
        try:
            token = token_file.read_text().strip()
        except OSError as err:
            raise WorkloadError(f"token of claim {uid}: {err}") from err
        return cls(uid, socket, token)

    def inspect(self) -> dict[str, Any]:
        """The claim as the node daemon prepared it (cores, LNC, devices)."""
        view: dict[str, Any] = self._request("GET", "")
        return view

    def submit(self, workload: Mapping[str, Any], cores: list[int] | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {"workload": dict(workload)}
        if cores is not None:
            body["cores"] = cores
        job: dict[str, Any] = self._request("POST", "/jobs", body)
        return job

    def start(self, workload: Mapping[str, Any]) -> str:
        """The id of the claim's unfinished job, else of a new one: a retried
        start (after a timeout, or a restarted stand-in) never runs the work twice."""
        jobs: list[dict[str, Any]] = self._request("GET", "/jobs")
        for job in jobs:
            if job["state"] in ("queued", "running"):
                return str(job["id"])
        return str(self.submit(workload)["id"])

    def job(self, job_id: str) -> dict[str, Any]:
        job: dict[str, Any] = self._request("GET", f"/jobs/{job_id}")
        return job
