"""The workload API of one node: simulated jobs for one prepared claim.

A container finds the socket and its claim's token through the CDI mounts and
sends `Authorization: Bearer <token>`. Cores are the host-global logical ids
of NEURON_RT_VISIBLE_CORES; any core outside the claim is refused.
"""

import hmac
from collections.abc import Mapping
from dataclasses import asdict, is_dataclass
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Header, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from driver.node.devices import logical_to_physical
from driver.node.durable.checkpoint import PREPARE_COMPLETED, ClaimRecord
from driver.node.durable.claimfiles import hash_token
from driver.node.durable.groupcommit import NodeState
from driver.node.sim.simhost import SimHost


class JobRequest(BaseModel):
    workload: dict[str, Any] = Field(
        description="Workload spec, e.g. {'kind': 'gemm', 'm': 4096, 'n': 4096, 'k': 4096}",
    )
    cores: list[int] | None = Field(
        default=None,
        description="Logical core ids from NEURON_RT_VISIBLE_CORES; default: all of the claim",
    )


class ClaimView(BaseModel):
    uid: str
    namespace: str
    name: str
    logical_neuron_core: int
    visible_cores: list[int]
    devices: list[str]


def job_view(job: Any) -> dict[str, Any]:
    """A JobInfo as JSON (dataclass fields; tuples become lists)."""
    if is_dataclass(job) and not isinstance(job, type):
        return asdict(job)
    return dict(vars(job))


def create_app(node_name: str, state: NodeState, sim: SimHost, cores_per_chip: int) -> FastAPI:
    app = FastAPI(
        title=f"trainium-dra workload API ({node_name})",
        version="v1",
        description="Submit, list, inspect and cancel simulated jobs on a claim's cores.",
    )

    @app.exception_handler(RequestValidationError)
    async def refused(_: Request, err: RequestValidationError) -> JSONResponse:
        """Each bad field and why, without echoing the input: FastAPI's own
        handler fails with a 500 on a body that is not UTF-8."""
        detail = [{"loc": list(e["loc"]), "msg": e["msg"], "type": e["type"]} for e in err.errors()]
        return JSONResponse(status_code=422, content={"detail": detail})

    def claim(uid: str, authorization: Annotated[str, Header()] = "") -> ClaimRecord:
        record = state.checkpoint.claims.get(uid)
        if record is None or record.state != PREPARE_COMPLETED:
            raise HTTPException(404, f"claim {uid} is not prepared on node {node_name}")
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token:
            raise HTTPException(
                401, "Authorization: send 'Bearer <token>' with the claim's token file"
            )
        if not hmac.compare_digest(hash_token(token), record.token_sha256):
            raise HTTPException(403, f"Authorization: token is not the one of claim {uid}")
        return record

    @app.get("/v1/claims/{uid}", response_model=ClaimView)
    def inspect_claim(record: Annotated[ClaimRecord, Depends(claim)]) -> ClaimView:
        return ClaimView(
            uid=record.uid,
            namespace=record.namespace,
            name=record.name,
            logical_neuron_core=record.lnc,
            visible_cores=record.visible_cores,
            devices=[f"{d.pool}/{d.device}" for d in record.devices],
        )

    @app.post("/v1/claims/{uid}/jobs", status_code=201)
    def submit_job(
        record: Annotated[ClaimRecord, Depends(claim)], body: JobRequest
    ) -> Mapping[str, Any]:
        cores = record.visible_cores if body.cores is None else body.cores
        if not cores:
            raise HTTPException(422, "cores: must name at least one core")
        outside = [c for c in cores if c not in record.visible_cores]
        if outside:
            raise HTTPException(
                403,
                f"cores: {outside} are not cores of claim {record.uid} "
                f"(NEURON_RT_VISIBLE_CORES={','.join(map(str, record.visible_cores))})",
            )
        physical = [
            pair
            for c in dict.fromkeys(cores)
            for pair in logical_to_physical(c, record.lnc, cores_per_chip)
        ]
        try:
            job = sim.submit(record.uid, body.workload, physical)
        except ValueError as err:  # WorkloadError names the workload field
            raise HTTPException(422, f"workload.{err}") from err
        return job_view(job)

    @app.get("/v1/claims/{uid}/jobs")
    def list_jobs(record: Annotated[ClaimRecord, Depends(claim)]) -> list[Mapping[str, Any]]:
        return [job_view(job) for job in sim.jobs(record.uid)]

    @app.get("/v1/claims/{uid}/jobs/{job_id}")
    def get_job(record: Annotated[ClaimRecord, Depends(claim)], job_id: str) -> Mapping[str, Any]:
        job = sim.job(record.uid, job_id)
        if job is None:
            raise HTTPException(404, f"job {job_id} is not a job of claim {record.uid}")
        return job_view(job)

    @app.delete("/v1/claims/{uid}/jobs/{job_id}")
    def cancel_job(
        record: Annotated[ClaimRecord, Depends(claim)], job_id: str
    ) -> Mapping[str, Any]:
        job = sim.cancel(record.uid, job_id)
        if job is None:
            raise HTTPException(404, f"job {job_id} is not a job of claim {record.uid}")
        return job_view(job)

    return app
