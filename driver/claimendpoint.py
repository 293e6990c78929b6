"""A container's client of its claim on the node's workload API: the socket
and token its CDI environment names, the claim's view, its jobs, its
collectives.

Used inside workload containers (the image's entry point) and by the local
cluster's kubelet stand-in, so it depends on neither side.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

TIMEOUT = 60.0
"""How long one request waits. A busy node can plan a large job for longer, so
a caller that starts one retries (`start` is safe to repeat)."""


class ClaimEndpointError(RuntimeError):
    """A container's claim endpoint failed it: the workload API refused or did not
    answer, or the claim's token or CDI mounts are missing. The message is what
    the pod shows."""


class ClaimEndpointUnreachableError(ClaimEndpointError):
    """Nothing answers on the socket: the node daemon is down or restarting."""


@dataclass(frozen=True)
class ClaimEndpoint:
    """Where and as whom a container talks to the workload API."""

    claim_uid: str
    socket: Path
    token: str

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
            raise ClaimEndpointUnreachableError(f"workload API at {self.socket}: {err}") from err
        except httpx.HTTPError as err:
            raise ClaimEndpointError(f"workload API at {self.socket}: {err}") from err
        if response.status_code >= 400:
            detail = response.json().get("detail", response.text)
            raise ClaimEndpointError(f"workload API {response.status_code}: {detail}")
        return response.json()

    @classmethod
    def from_environment(cls, env: Mapping[str, str]) -> "ClaimEndpoint":
        """Inside a container: the CDI environment names the mounted socket and token."""
        try:
            uid = env["TRAINIUM_DRA_CLAIM_UID"]
            socket = Path(env["TRAINIUM_DRA_WORKLOAD_SOCKET"])
            token_file = Path(env["TRAINIUM_DRA_TOKEN_FILE"])
        except KeyError as err:
            raise ClaimEndpointError(
                f"{err.args[0]} is not set: this container got no claim of the driver "
                "(add a resourceClaims entry to the pod and the container's resources.claims)"
            ) from None
        try:
            token = token_file.read_text().strip()
        except OSError as err:
            raise ClaimEndpointError(f"token of claim {uid}: {err}") from err
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
        for job in self.jobs():
            if job["state"] in ("queued", "running"):
                return str(job["id"])
        return str(self.submit(workload)["id"])

    def collectives(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """Collectives timed by the node on the claim's chips (and the peers named)."""
        answer: dict[str, Any] = self._request("POST", "/collectives", dict(request))
        return answer

    def jobs(self) -> list[dict[str, Any]]:
        """Every job of the claim the daemon still remembers."""
        jobs: list[dict[str, Any]] = self._request("GET", "/jobs")
        return jobs

    def job(self, job_id: str) -> dict[str, Any]:
        job: dict[str, Any] = self._request("GET", f"/jobs/{job_id}")
        return job
